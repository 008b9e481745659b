// PlanCache: bounded, least recently used out first, but never a plan the
// group being built holds (its runs point at it).
#include <gtest/gtest.h>

#include <set>

#include "exec/plan_cache.h"

namespace ferry {
namespace {

std::unique_ptr<Executor> emptyExecutor() {
  return std::make_unique<Executor>(Schedule{"test", {}}, std::vector<void*>{nullptr, nullptr}, 1, ReduceSpec{},
                                    ExecOptions{});
}

CollArgs shape(size_t count) {
  CollArgs a;
  a.count = count;
  return a;
}

TEST(PlanCache, PlansOfTheCurrentGroupAreNeverEvicted) {
  PlanCache c;
  c.beginUse();
  std::set<Executor*> held;
  const size_t n = PlanCache::kMaxPlans + 20;
  for (size_t i = 0; i < n; ++i) held.insert(c.add(shape(i + 1), emptyExecutor()));
  EXPECT_EQ(c.size(), n);  // grew past the bound rather than drop a held plan
  for (size_t i = 0; i < n; ++i) EXPECT_TRUE(held.count(c.find(shape(i + 1)))) << i;
  // The next group: the cache shrinks back to the bound as new plans come,
  // the least recently used going first; what this group uses stays.
  c.beginUse();
  Executor* kept = c.find(shape(5));
  c.add(shape(1000), emptyExecutor());
  EXPECT_EQ(c.size(), PlanCache::kMaxPlans);
  EXPECT_EQ(c.find(shape(5)), kept);
  EXPECT_EQ(c.find(shape(1)), nullptr);  // the least recently used went
}

TEST(PlanCache, SendRecvBatchesAreKeyedByPeersDirectionsAndSizes) {
  PlanCache c;
  c.beginUse();
  std::vector<P2pOp> a{{true, 1, 64}, {false, 1, 64}};
  std::vector<P2pOp> b{{true, 1, 64}, {false, 1, 128}};
  Executor* ea = c.addP2p(a, emptyExecutor());
  EXPECT_EQ(c.findP2p(a), ea);
  EXPECT_EQ(c.findP2p(b), nullptr);
  EXPECT_EQ(c.find(shape(64)), nullptr);  // collective plans are another kind
}

}  // namespace
}  // namespace ferry
