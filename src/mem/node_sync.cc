#include "mem/node_sync.h"

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
  if (own_) (void)freeShared(own_);
}

Result<std::unique_ptr<NodeSync>> NodeSync::create(PeerExchange& ex, int rank, int nranks,
                                                   const std::vector<PeerInfo>& peers) {
  std::unique_ptr<NodeSync> s(new NodeSync);
  // A page of the same shared memory ncclMemAlloc hands out (fd -1: private).
  SharedRange range;
  Result<void*> page = allocShared(kPageBytes);
  if (page.isOk()) {
    s->own_ = new (page.value()) Page{};
    if (!lookupShared(s->own_, kPageBytes, &range)) range.fd = -1;
  }
  std::vector<SyncInfo> all(nranks);
  all[rank] = SyncInfo{static_cast<int32_t>(getpid()), range.fd, peers[rank].hostHash};
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

int NodeSync::firstMismatch(SymDescriptor Page::*field, SymDescriptor* theirs) const {
  for (size_t r = 0; r < pages_.size(); ++r) {
    if (pages_[r]->*field == own_->*field) continue;
    *theirs = pages_[r]->*field;
    return static_cast<int>(r);
  }
  return -1;
}

int NodeSync::firstDeviceMismatch(SymDescriptor* theirs) const { return firstMismatch(&Page::devDesc, theirs); }

int NodeSync::firstMismatch(SymDescriptor* theirs) const { return firstMismatch(&Page::desc, theirs); }

}  // namespace ferry::mem
