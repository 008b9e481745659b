// Staging: the copies an in-place operation sends from, reused call to call.
//
// An in-place AlltoAll (or a Send/Recv group whose sends overlap its
// receives) must send from a copy taken at the call: blocks arrive while
// others are still being sent. A fresh heap block per call cost more than
// the collective at large sizes (64 MiB: 36 ms against 6 ms out of place,
// most of it page faults on the new pages). The pool keeps the last block
// and hands it out again once nobody holds it. Blocks come from allocShared,
// so a peer on this host reads a piece of the copy straight from our pages
// (one memcpy, by reference) instead of through the ring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/status.h"

namespace ferry::mem {

// Makes a block a target of a device's asynchronous copies (CUDA: page-locked
// by cuMemHostRegister; pageable memory makes the driver copy synchronously,
// holding the caller until its stream gets there) and undoes that before the
// block is freed. `ctx` tells pinners apart and outlives every block pinned
// with it (an accelerator backend lives until exit).
//
// The last holder of a pinned block may be a stream's host function (the
// bridge's job ends there, possibly after its communicator is gone), where
// CUDA calls are not permitted: a pinned block whose last holder lets go
// waits in a process-wide graveyard and is unpinned and freed by the next
// take() or release() of any pool, or a pool's destructor, on that
// caller's thread (at exit, what is left is left to the OS).
struct BlockPinner {
  void* ctx = nullptr;
  Status (*pin)(void* ctx, void* p, size_t bytes) = nullptr;
  void (*unpin)(void* ctx, void* p) = nullptr;
};

class StagingPool {
 public:
  // keep: how many blocks the pool holds on to (the bridge of device
  // memory, comm/stream_bridge.h, has several operations in flight);
  // keepBytes: how many bytes, counting blocks in use, before idle ones are
  // dropped for a new block (blocks in use are never dropped for it, so the
  // working set of the operations in flight is kept whatever its size).
  explicit StagingPool(size_t keep = 1, size_t keepBytes = SIZE_MAX);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;
  // A block of at least `bytes`, not zero-filled (the caller overwrites
  // it). The block stays the caller's until its last copy of the pointer
  // is dropped; then the pool may hand it out again.
  // With `pinner`, the block is pinned with it (once: kept blocks stay
  // pinned until they are freed).
  Result<std::shared_ptr<char[]>> take(size_t bytes, const BlockPinner* pinner = nullptr);
  // A block of take(bytes) holding a copy of src's `bytes`.
  Result<std::shared_ptr<char[]>> copyOf(const void* src, size_t bytes);
  // Frees the kept block if nobody holds it (a communicator's teardown),
  // and the graveyard's.
  void release();
  size_t keptBytes() const;

 private:
  // The pinners a block was pinned with; its deleter unpins them all.
  using Pins = std::vector<BlockPinner>;
  struct Block {
    std::shared_ptr<char[]> p;  // the pool's own reference
    size_t bytes = 0;
    std::shared_ptr<Pins> pins;
  };
  static Status pinWith(const Block& b, const BlockPinner* pinner);
  // Unpins and frees the graveyard's blocks (above).
  static void reap();
  size_t keptBytesLocked() const;
  const size_t keep_;
  const size_t keepBytes_;
  mutable std::mutex mu_;
  std::vector<Block> kept_;
};

}  // namespace ferry::mem
