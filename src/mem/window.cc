#include "mem/window.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "core/log.h"

namespace ferry::mem {
namespace {

// What each rank tells the others about its buffer.
struct WindowInfo {
  int32_t pid = 0;
  int32_t fd = -1;           // -1: not shared memory
  uint64_t fileOffset = 0;
  uint64_t bytes = 0;
  uint64_t hostHash = 0;
  uint32_t device = 0;       // 1: device memory, described by `handle`
  uint32_t exported = 0;     // 1: `handle` is valid
  accel::IpcHandle handle;
};

// Every rank's verdict: did it map everything it needed?
Result<bool> agree(PeerExchange& ex, int rank, size_t nranks, bool mine) {
  std::vector<uint32_t> all(nranks, 0);
  all[rank] = mine ? 1 : 0;
  FERRY_TRY(ex.allGather(all.data(), sizeof(uint32_t)));
  return std::all_of(all.begin(), all.end(), [](uint32_t v) { return v == 1; });
}

// Every rank's buffer as the others must name it; sizes must agree.
Result<std::vector<WindowInfo>> exchangeInfo(PeerExchange& ex, int rank,
                                             const std::vector<PeerInfo>& peers, const Window& w) {
  std::vector<WindowInfo> all(peers.size());
  all[rank].pid = static_cast<int32_t>(getpid());
  all[rank].bytes = w.bytes;
  all[rank].hostHash = peers[rank].hostHash;
  SharedRange range;
  if (w.device) {
    all[rank].device = 1;
    Status st = w.device->exportMemory(w.base, w.bytes, &all[rank].handle);
    all[rank].exported = st.isOk() ? 1 : 0;
    if (!st.isOk()) FERRY_INFO(log::kInit, "window on %s memory not shared: %s", w.device->name(),
                               st.message().c_str());
  } else if (lookupShared(w.base, w.bytes, &range)) {
    all[rank].fd = range.fd;
    all[rank].fileOffset = range.fileOffset;
  }
  FERRY_TRY(ex.allGather(all.data(), sizeof(WindowInfo)));
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].bytes != w.bytes)
      return invalidUsage("ncclCommWindowRegister: rank " + std::to_string(r) + " registers " +
                          std::to_string(all[r].bytes) + " bytes, rank " + std::to_string(rank) +
                          " " + std::to_string(w.bytes) + " (windows are symmetric: same size on every rank)");
  }
  return all;
}

// Imports rank r's device window into w; "" when done, else why not.
std::string importOne(const WindowInfo& theirs, size_t r, Window* w) {
  if (!theirs.exported) return "rank " + std::to_string(r) + "'s device memory cannot be shared";
  Result<void*> p = w->device->importMemory(theirs.handle, w->bytes);
  if (!p.isOk()) return p.status().message();
  w->peerBase[r] = static_cast<char*>(p.value());
  w->imported.push_back(p.value());
  return "";
}

// Maps every other rank's buffer into w; "" when all are mapped, else why not.
std::string mapEach(const std::vector<WindowInfo>& all, int rank, Window* w) {
  if (all.size() < 2) return "one rank";
  for (size_t r = 0; r < all.size(); ++r) {
    if (static_cast<int>(r) == rank) continue;
    if (all[r].hostHash != all[rank].hostHash) return "rank " + std::to_string(r) + " is on another host";
    if (all[r].device != all[rank].device)
      return "rank " + std::to_string(r) + "'s buffer is " + (all[r].device ? "" : "not ") + "device memory";
    if (w->device) {
      if (std::string why = importOne(all[r], r, w); !why.empty()) return why;
      continue;
    }
    if (all[r].fd < 0) return "rank " + std::to_string(r) + "'s buffer is not from ncclMemAlloc";
    Result<PeerMapping> m = PeerMapping::map(all[r].pid, all[r].fd, all[r].fileOffset, w->bytes);
    if (!m.isOk()) return m.status().message();
    w->peerBase[r] = m.value().data();
    w->maps.push_back(m.take());
  }
  return "";
}

}  // namespace

Result<Window*> WindowTable::add(PeerExchange& ex, int rank, const std::vector<PeerInfo>& peers,
                                 void* buff, size_t bytes, int flags) {
  auto w = std::make_unique<Window>();
  w->id = nextId_++;
  w->base = static_cast<char*>(buff);
  w->bytes = bytes;
  w->flags = flags;
  w->peerBase.assign(peers.size(), nullptr);
  w->peerBase[rank] = w->base;
  if (accel::anyDevice()) {
    accel::Accelerator& owner = accel::ownerOf(buff);
    if (&owner != &accel::host()) w->device = &owner;
  }
  FERRY_ASSIGN(std::vector<WindowInfo> all, exchangeInfo(ex, rank, peers, *w));
  std::string why = mapEach(all, rank, w.get());
  FERRY_ASSIGN(bool everyone, agree(ex, rank, peers.size(), why.empty()));
  if (everyone && !sync_) {
    FERRY_ASSIGN(everyone, makeSync(ex, rank, peers, &why));
  }
  w->shared = everyone;
  if (!everyone) {
    w->maps.clear();
    for (void* p : w->imported) (void)w->device->closeImported(p);
    w->imported.clear();
    std::fill(w->peerBase.begin(), w->peerBase.end(), nullptr);
    w->peerBase[rank] = w->base;
  }
  FERRY_INFO(log::kInit, "window %u: %zu bytes of %s memory at %p, %s%s%s", w->id, w->bytes,
             w->device ? w->device->name() : "host", static_cast<void*>(w->base), everyone ? "shared by every rank (symmetric collectives)"
                                                   : "not shared",
             why.empty() ? "" : ": ", why.c_str());
  windows_.push_back(std::move(w));
  return windows_.back().get();
}

// Collective, once every rank mapped the first shared window: the barrier
// pages, kept only if every rank made and mapped them.
Result<bool> WindowTable::makeSync(PeerExchange& ex, int rank, const std::vector<PeerInfo>& peers,
                                   std::string* why) {
  Result<std::unique_ptr<NodeSync>> s = NodeSync::create(ex, rank, static_cast<int>(peers.size()), peers);
  if (s.isOk()) {
    sync_ = s.take();
  } else {
    *why = s.status().message();
  }
  FERRY_ASSIGN(bool everyone, agree(ex, rank, peers.size(), sync_ != nullptr));
  if (!everyone) sync_.reset();
  return everyone;
}

Status WindowTable::remove(const void* w) {
  auto it = std::find_if(windows_.begin(), windows_.end(),
                         [w](const std::unique_ptr<Window>& x) { return x.get() == w; });
  if (it == windows_.end()) return invalidArgument("win is not a window of this communicator");
  windows_.erase(it);
  return Status::ok();
}

Window::~Window() {
  for (void* p : imported) (void)device->closeImported(p);
}

void WindowTable::abandon() {
  (void)sync_.release();
  for (auto& w : windows_) w->imported.clear();
}

const Window* WindowTable::find(const void* p, size_t bytes, size_t* offset) const {
  const char* c = static_cast<const char*>(p);
  for (const auto& w : windows_) {
    if (c < w->base || c > w->base + w->bytes) continue;
    size_t off = static_cast<size_t>(c - w->base);
    if (bytes > w->bytes - off) continue;
    *offset = off;
    return w.get();
  }
  return nullptr;
}

}  // namespace ferry::mem
