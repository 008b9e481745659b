#include "mem/staging.h"

#include <atomic>

#include "mem/shared_alloc.h"

namespace ferry::mem {

Result<std::shared_ptr<char[]>> StagingPool::take(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  // use_count() == 1: only the pool holds it, so no run still reads it.
  if (kept_ && kept_.use_count() == 1 && keptBytes_ >= bytes) {
    // The last other holder's release (an atomic decrement) before our
    // reuse: its run's reads of the block are over.
    std::atomic_thread_fence(std::memory_order_acquire);
    return kept_;
  }
  FERRY_ASSIGN(void* p, allocShared(bytes == 0 ? 1 : bytes));
  std::shared_ptr<char[]> block(static_cast<char*>(p), [](char* q) { (void)freeShared(q); });
  // Keep the larger block: a communicator alternating two sizes settles on
  // one block; one still in use elsewhere is replaced and freed by its user.
  if (!kept_ || kept_.use_count() == 1 || bytes >= keptBytes_) {
    kept_ = block;
    keptBytes_ = bytes;
  }
  return block;
}

void StagingPool::release() {
  std::lock_guard<std::mutex> lock(mu_);
  kept_.reset();
  keptBytes_ = 0;
}

size_t StagingPool::keptBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kept_ ? keptBytes_ : 0;
}

}  // namespace ferry::mem
