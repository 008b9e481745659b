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
#include <memory>
#include <mutex>

#include "core/status.h"

namespace ferry::mem {

class StagingPool {
 public:
  // A block of at least `bytes`, not zero-filled (the caller overwrites
  // it). The block stays the caller's until its last copy of the pointer
  // is dropped; then the pool may hand it out again.
  Result<std::shared_ptr<char[]>> take(size_t bytes);
  // Frees the kept block if nobody holds it (a communicator's teardown).
  void release();
  size_t keptBytes() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<char[]> kept_;  // the pool's own reference
  size_t keptBytes_ = 0;
};

}  // namespace ferry::mem
