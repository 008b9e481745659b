#include "mem/node_sync.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <string>

namespace ferry::mem {
namespace {

struct SyncInfo {
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t hostHash = 0;
};

constexpr size_t kPageBytes = 4096;

}  // namespace

NodeSync::~NodeSync() {
  maps_.clear();
  if (own_) munmap(own_, kPageBytes);
  if (memfd_ >= 0) close(memfd_);
}

Result<std::unique_ptr<NodeSync>> NodeSync::create(PeerExchange& ex, int rank, int nranks,
                                                   const std::vector<PeerInfo>& peers) {
  std::unique_ptr<NodeSync> s(new NodeSync);
  s->rank_ = rank;
  s->memfd_ = memfd_create("ferry-sync", MFD_CLOEXEC);
  void* p = MAP_FAILED;
  if (s->memfd_ >= 0 && ftruncate(s->memfd_, kPageBytes) == 0)
    p = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd_, 0);
  if (p != MAP_FAILED) s->own_ = new (p) Page{};
  std::vector<SyncInfo> all(nranks);
  all[rank] = SyncInfo{static_cast<int32_t>(getpid()), s->own_ ? s->memfd_ : -1,
                       peers[rank].hostHash};
  // Every rank takes part in the exchange even when its own page failed, so
  // that all of them learn it and fail together.
  FERRY_TRY(ex.allGather(all.data(), sizeof(SyncInfo)));
  s->pages_.assign(nranks, nullptr);
  s->pages_[rank] = s->own_;
  for (int r = 0; r < nranks; ++r) {
    if (all[r].fd < 0) return systemError("rank " + std::to_string(r) + " has no shared sync page");
    if (all[r].hostHash != all[rank].hostHash)
      return invalidUsage("rank " + std::to_string(r) + " is on another host");
    if (r == rank) continue;
    FERRY_ASSIGN(PeerMapping m, PeerMapping::map(all[r].pid, all[r].fd, 0, kPageBytes));
    s->pages_[r] = reinterpret_cast<Page*>(m.data());
    s->maps_.push_back(std::move(m));
  }
  return s;
}

void NodeSync::arrive() { own_->arrived.store(++gen_, std::memory_order_release); }

bool NodeSync::passed() const {
  for (Page* p : pages_)
    if (p->arrived.load(std::memory_order_acquire) < gen_) return false;
  return true;
}

void NodeSync::waitingOn(std::vector<int>* out) const {
  for (size_t r = 0; r < pages_.size(); ++r)
    if (pages_[r]->arrived.load(std::memory_order_acquire) < gen_) out->push_back(static_cast<int>(r));
}

void NodeSync::publish(const SymDescriptor& d) { own_->desc = d; }

int NodeSync::firstMismatch(SymDescriptor* theirs) const {
  for (size_t r = 0; r < pages_.size(); ++r) {
    if (pages_[r]->desc == own_->desc) continue;
    *theirs = pages_[r]->desc;
    return static_cast<int>(r);
  }
  return -1;
}

}  // namespace ferry::mem
