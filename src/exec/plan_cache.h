// PlanCache: the executors of a communicator's earlier collectives and
// Send/Recv batches, by call shape, so a repeated call reuses its schedule,
// connections and buffers instead of choosing and building again (a group
// of one Send and one Recv built a new executor per call: 8-byte SendRecv
// took 1.1 us, mostly malloc and free). Bounded: the least recently used
// plan goes first, but never one the group being built holds (a group may
// hold more shapes than the bound; evicting one of its plans ran a freed
// executor).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "algorithms/schedule.h"
#include "exec/executor.h"

namespace ferry {

class PlanCache {
 public:
  static constexpr size_t kMaxPlans = 64;

  // A group (or a call outside one) begins: the plans found or added until
  // the next begin are in use and stay.
  void beginUse() { ++epoch_; }
  // The plan of an earlier call of the same shape (kind, root, count,
  // element size, in place), or null.
  Executor* find(const CollArgs& a);
  Executor* add(const CollArgs& a, std::unique_ptr<Executor> e);
  // Where a plan sits: valid while the cache keeps its shape (any plan
  // added or evicted moves the others). touch() marks it in use like
  // find() and returns its executor; null once the generation moved.
  struct Ref {
    size_t index = 0;
    uint64_t generation = 0;
  };
  // The plan last found or added is checked first: with a scan of every
  // plan, remembering each Send/Recv group (repeat_call.h) cost an 8 B-16 KiB
  // sweep 6-13% (its buffers move each iteration, so nothing repeats and
  // every call is looked up and remembered).
  Ref refOf(const Executor* e) const;
  Executor* touch(const Ref& r) {
    if (r.generation != generation_) return nullptr;
    plans_[r.index].used = epoch_;
    return plans_[r.index].exec.get();
  }
  // The same for a batch of Send/Recv (peers, directions and sizes in order).
  Executor* findP2p(const std::vector<P2pOp>& ops);
  Executor* addP2p(const std::vector<P2pOp>& ops, std::unique_ptr<Executor> e);
  void clear() {
    plans_.clear();
    ++generation_;
  }
  size_t size() const { return plans_.size(); }

 private:
  struct Plan {
    bool p2p = false;
    CollArgs args;
    std::vector<P2pOp> ops;
    uint64_t used = 0;  // the epoch it was last found or added in
    std::unique_ptr<Executor> exec;
  };
  Executor* keep(Plan p);

  std::vector<Plan> plans_;
  size_t last_ = 0;  // index of the plan last found or added
  uint64_t epoch_ = 1;
  uint64_t generation_ = 1;  // bumped whenever plans_ changes shape
};

}  // namespace ferry
