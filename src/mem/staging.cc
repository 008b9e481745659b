#include "mem/staging.h"

#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "core/log.h"
#include "mem/shared_alloc.h"

namespace ferry::mem {

namespace {

// Pinned blocks whose last holder let go (staging.h). Never destroyed: a
// stream's last task may drop a block while the process exits.
struct Graveyard {
  std::mutex mu;
  std::vector<std::pair<char*, std::shared_ptr<std::vector<BlockPinner>>>> dead;
};
Graveyard& graveyard() {
  static Graveyard* g = new Graveyard;
  return *g;
}

}  // namespace

StagingPool::StagingPool(size_t keep, size_t keepBytes)
    : keep_(keep == 0 ? 1 : keep), keepBytes_(keepBytes) {}

StagingPool::~StagingPool() { release(); }

void StagingPool::reap() {
  std::vector<std::pair<char*, std::shared_ptr<Pins>>> dead;
  {
    Graveyard& g = graveyard();
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.dead.empty()) return;
    dead.swap(g.dead);
  }
  for (auto& [p, pins] : dead) {
    for (const BlockPinner& b : *pins) b.unpin(b.ctx, p);
    (void)freeShared(p);
  }
}

Status StagingPool::pinWith(const Block& b, const BlockPinner* pinner) {
  if (!pinner || !pinner->pin) return Status::ok();
  for (const BlockPinner& q : *b.pins)
    if (q.ctx == pinner->ctx) return Status::ok();
  FERRY_TRY(pinner->pin(pinner->ctx, b.p.get(), b.bytes == 0 ? 1 : b.bytes));
  b.pins->push_back(*pinner);
  return Status::ok();
}

Result<std::shared_ptr<char[]>> StagingPool::take(size_t bytes, const BlockPinner* pinner) {
  reap();
  std::lock_guard<std::mutex> lock(mu_);
  // use_count() == 1: only the pool holds it, so no run still reads it.
  // The smallest such block that fits.
  Block* fit = nullptr;
  for (Block& b : kept_)
    if (b.p.use_count() == 1 && b.bytes >= bytes && (!fit || b.bytes < fit->bytes)) fit = &b;
  if (fit) {
    // The last other holder's release (an atomic decrement) before our
    // reuse: its run's reads of the block are over.
    std::atomic_thread_fence(std::memory_order_acquire);
    FERRY_TRY(pinWith(*fit, pinner));
    return fit->p;
  }
  FERRY_ASSIGN(void* p, allocShared(bytes == 0 ? 1 : bytes));
  FERRY_INFO(log::kAlloc, "staging: a new shared block of %zu bytes (%zu kept)", bytes, kept_.size());
  auto pins = std::make_shared<Pins>();
  // Unpinned before it is unmapped (a device must not keep pages that go),
  // on a thread that may call the device (the graveyard, above).
  std::shared_ptr<char[]> block(static_cast<char*>(p), [pins](char* q) {
    if (pins->empty()) {
      (void)freeShared(q);
      return;
    }
    Graveyard& g = graveyard();
    std::lock_guard<std::mutex> lock(g.mu);
    g.dead.emplace_back(q, pins);
  });
  Block made{block, bytes, pins};
  FERRY_TRY(pinWith(made, pinner));
  // Make room: drop idle blocks, smallest first, while the new one would
  // break a limit. Idle blocks are all smaller than this one (else one
  // would have served), so the pool settles on the sizes in use.
  for (;;) {
    if (kept_.size() < keep_ && keptBytesLocked() + bytes <= keepBytes_) break;
    auto idle = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (it->p.use_count() == 1 && (idle == kept_.end() || it->bytes < idle->bytes)) idle = it;
    if (idle == kept_.end()) break;
    kept_.erase(idle);
  }
  // Over the byte limit with nothing idle left: kept all the same (the
  // operations in flight need it); a block still in use elsewhere when the
  // count is full is freed by its last user.
  if (kept_.size() < keep_) kept_.push_back(made);
  return block;
}

Result<std::shared_ptr<char[]>> StagingPool::copyOf(const void* src, size_t bytes) {
  FERRY_ASSIGN(std::shared_ptr<char[]> block, take(bytes));
  std::memcpy(block.get(), src, bytes);
  return block;
}

void StagingPool::release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kept_.clear();
  }
  reap();
}

size_t StagingPool::keptBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keptBytesLocked();
}

size_t StagingPool::keptBytesLocked() const {
  size_t n = 0;
  for (const Block& b : kept_) n += b.bytes;
  return n;
}

}  // namespace ferry::mem
