// PlanCache: the executors of a communicator's earlier collectives, by call
// shape, so a repeated call reuses its schedule and buffers instead of
// choosing and building again. Bounded: the oldest plan goes first.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "algorithms/schedule.h"
#include "exec/executor.h"

namespace ferry {

class PlanCache {
 public:
  static constexpr size_t kMaxPlans = 64;

  // The plan of an earlier call of the same shape (kind, root, count,
  // element size, in place), or null.
  Executor* find(const CollArgs& a) const;
  Executor* add(const CollArgs& a, std::unique_ptr<Executor> e);
  void clear() { plans_.clear(); }

 private:
  std::vector<std::pair<CollArgs, std::unique_ptr<Executor>>> plans_;
};

}  // namespace ferry
