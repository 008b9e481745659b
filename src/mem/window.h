// Windows: ncclCommWindowRegister for host and device memory.
//
// Registering is collective: every rank names a buffer of the same size
// (normally from ncclMemAlloc, which is shared memory: shared_alloc.h), the
// ranks exchange how to map it, and each maps every other rank's buffer of
// this host. A window is "shared" when every rank mapped every other rank's
// window, i.e. all ranks are on one host and all buffers came from
// ncclMemAlloc; only then may collectives on it run as direct loads and
// stores (algorithms/symmetric.cc). Device memory (every rank's from one
// backend that can share it) is shared the same way through the backend's
// IPC handles, and its collectives run as that backend's stream work
// (comm/device_direct.h). Any other window is still valid: its
// collectives take the usual paths. The ranks also agree, by one more
// exchange, on whether it is shared, so they always decide alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "accel/accelerator.h"
#include "core/status.h"
#include "mem/node_sync.h"
#include "mem/shared_alloc.h"
#include "transports/transport.h"

namespace ferry::mem {

struct Window {
  Window() = default;
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  ~Window();  // unmaps what it imported

  uint32_t id = 0;              // registration order, equal on every rank
  char* base = nullptr;
  size_t bytes = 0;
  int flags = 0;
  bool shared = false;
  std::vector<char*> peerBase;  // rank -> its window mapped here (shared windows)
  std::vector<PeerMapping> maps;
  // Device memory (every rank's, of one backend): peers' windows are
  // imported through the backend (Accelerator::importMemory) and are
  // operands of its stream work only (comm/device_direct.h).
  accel::Accelerator* device = nullptr;
  std::vector<void*> imported;
};

class WindowTable {
 public:
  // Collective over `ex` (all ranks, same order): registers [buff, +bytes).
  Result<Window*> add(PeerExchange& ex, int rank, const std::vector<PeerInfo>& peers, void* buff,
                      size_t bytes, int flags);
  // Local: forgets and unmaps `w`; an error if it is not one of ours.
  Status remove(const void* w);
  // The window holding [p, p + bytes), or null; *offset is p's offset in it.
  const Window* find(const void* p, size_t bytes, size_t* offset) const;
  // The shared barrier page (set once a shared window exists).
  NodeSync* sync() const { return sync_.get(); }
  bool empty() const { return windows_.empty(); }

  // Stream work on device windows could not be waited for
  // (comm/device_direct.h): the sync pages and imported windows stay
  // mapped for it (leaked) instead of being unmapped under it.
  void abandon();

 private:
  Result<bool> makeSync(PeerExchange& ex, int rank, const std::vector<PeerInfo>& peers,
                        std::string* why);

  std::vector<std::unique_ptr<Window>> windows_;
  std::unique_ptr<NodeSync> sync_;
  uint32_t nextId_ = 1;
};

}  // namespace ferry::mem
