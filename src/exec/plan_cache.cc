#include "exec/plan_cache.h"

#include <algorithm>

namespace ferry {
namespace {
// rank and nranks are the communicator's; the rest is the call's.
bool sameShape(const CollArgs& a, const CollArgs& b) {
  return a.kind == b.kind && a.root == b.root && a.count == b.count && a.elemSize == b.elemSize &&
         a.inPlace == b.inPlace && a.symmetric == b.symmetric && a.streamPieceBytes == b.streamPieceBytes &&
         a.rank == b.rank && a.nranks == b.nranks;
}

bool sameOps(const std::vector<P2pOp>& a, const std::vector<P2pOp>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const P2pOp& x, const P2pOp& y) {
    return x.isSend == y.isSend && x.peer == y.peer && x.bytes == y.bytes;
  });
}
}  // namespace

Executor* PlanCache::find(const CollArgs& a) {
  for (size_t i = 0; i < plans_.size(); ++i) {
    Plan& p = plans_[i];
    if (!p.p2p && sameShape(p.args, a)) {
      p.used = epoch_;
      last_ = i;
      return p.exec.get();
    }
  }
  return nullptr;
}

Executor* PlanCache::findP2p(const std::vector<P2pOp>& ops) {
  for (size_t i = 0; i < plans_.size(); ++i) {
    Plan& p = plans_[i];
    if (p.p2p && sameOps(p.ops, ops)) {
      p.used = epoch_;
      last_ = i;
      return p.exec.get();
    }
  }
  return nullptr;
}

PlanCache::Ref PlanCache::refOf(const Executor* e) const {
  if (last_ < plans_.size() && plans_[last_].exec.get() == e) return Ref{last_, generation_};
  for (size_t i = 0; i < plans_.size(); ++i)
    if (plans_[i].exec.get() == e) return Ref{i, generation_};
  return Ref{0, 0};  // generation 0 never matches
}

Executor* PlanCache::add(const CollArgs& a, std::unique_ptr<Executor> e) {
  Plan p;
  p.args = a;
  p.exec = std::move(e);
  return keep(std::move(p));
}

Executor* PlanCache::addP2p(const std::vector<P2pOp>& ops, std::unique_ptr<Executor> e) {
  Plan p;
  p.p2p = true;
  p.ops = ops;
  p.exec = std::move(e);
  return keep(std::move(p));
}

Executor* PlanCache::keep(Plan p) {
  // Evict the least recently used plans not in use; a group holding more
  // than the bound makes the cache grow until a later group lets it shrink.
  while (plans_.size() >= kMaxPlans) {
    auto oldest = plans_.end();
    for (auto it = plans_.begin(); it != plans_.end(); ++it) {
      if (it->used < epoch_ && (oldest == plans_.end() || it->used < oldest->used)) oldest = it;
    }
    if (oldest == plans_.end()) break;
    plans_.erase(oldest);
  }
  p.used = epoch_;
  plans_.push_back(std::move(p));
  last_ = plans_.size() - 1;
  ++generation_;
  return plans_.back().exec.get();
}

}  // namespace ferry
