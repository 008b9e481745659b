// StagingPool: the copies in-place operations send from are reused once
// nobody holds them, never while someone does, and live in shared memory.
#include "mem/staging.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "mem/shared_alloc.h"

namespace ferry::mem {
namespace {

std::shared_ptr<char[]> take(StagingPool& pool, size_t bytes) {
  Result<std::shared_ptr<char[]>> r = pool.take(bytes);
  EXPECT_TRUE(r.isOk()) << r.status().message();
  return r.isOk() ? r.take() : nullptr;
}

TEST(StagingPool, ReusesABlockNobodyHolds) {
  StagingPool pool;
  std::shared_ptr<char[]> a = take(pool, 1 << 20);
  ASSERT_TRUE(a);
  char* first = a.get();
  std::memset(first, 7, 1 << 20);
  a.reset();
  std::shared_ptr<char[]> b = take(pool, 4096);  // smaller: the kept block serves it
  ASSERT_TRUE(b);
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(pool.keptBytes(), size_t{1} << 20);
}

TEST(StagingPool, NeverHandsOutABlockStillHeld) {
  StagingPool pool;
  std::shared_ptr<char[]> a = take(pool, 8192);
  ASSERT_TRUE(a);
  std::shared_ptr<char[]> b = take(pool, 8192);
  ASSERT_TRUE(b);
  EXPECT_NE(a.get(), b.get());
  // Both writable over their whole length, independently.
  std::memset(a.get(), 1, 8192);
  std::memset(b.get(), 2, 8192);
  EXPECT_EQ(a.get()[8191], 1);
  EXPECT_EQ(b.get()[0], 2);
}

TEST(StagingPool, GrowsWhenTheKeptBlockIsTooSmall) {
  StagingPool pool;
  std::shared_ptr<char[]> a = take(pool, 4096);
  ASSERT_TRUE(a);
  a.reset();
  std::shared_ptr<char[]> b = take(pool, 3 << 20);
  ASSERT_TRUE(b);
  std::memset(b.get(), 3, 3 << 20);
  EXPECT_EQ(pool.keptBytes(), size_t{3} << 20);
  b.reset();
  std::shared_ptr<char[]> c = take(pool, 3 << 20);
  ASSERT_TRUE(c);
  EXPECT_EQ(c.get()[(3 << 20) - 1], 3);  // the same block again, not a fresh one
}

TEST(StagingPool, BlocksAreSharedMemoryPeersCanMap) {
  StagingPool pool;
  std::shared_ptr<char[]> a = take(pool, 1 << 16);
  ASSERT_TRUE(a);
  SharedRange r;
  EXPECT_TRUE(lookupShared(a.get(), 1 << 16, &r));
  EXPECT_GE(r.allocBytes, size_t{1} << 16);
}

TEST(StagingPool, ReleaseFreesTheKeptBlock) {
  StagingPool pool;
  std::shared_ptr<char[]> a = take(pool, 1 << 16);
  ASSERT_TRUE(a);
  char* p = a.get();
  a.reset();
  pool.release();
  EXPECT_EQ(pool.keptBytes(), 0u);
  SharedRange r;
  EXPECT_FALSE(lookupShared(p, 1, &r));  // freed, not merely forgotten
}

// The bridge's pool (comm/stream_bridge.h) keeps several blocks: operations
// queued together each hold one, and all come back for the next round.
TEST(StagingPool, KeepsSeveralBlocksWhenAsked) {
  StagingPool pool(3);
  std::set<char*> first;
  {
    std::shared_ptr<char[]> a = take(pool, 8192), b = take(pool, 8192), c = take(pool, 16384);
    ASSERT_TRUE(a && b && c);
    first = {a.get(), b.get(), c.get()};
    EXPECT_EQ(first.size(), 3u);
  }
  EXPECT_EQ(pool.keptBytes(), size_t{8192 + 8192 + 16384});
  std::shared_ptr<char[]> a = take(pool, 8192), b = take(pool, 8192), c = take(pool, 16384);
  EXPECT_EQ((std::set<char*>{a.get(), b.get(), c.get()}), first);
  // A fourth while all three are held is fresh, and not kept.
  std::shared_ptr<char[]> d = take(pool, 4096);
  ASSERT_TRUE(d);
  EXPECT_EQ(first.count(d.get()), 0u);
  EXPECT_EQ(pool.keptBytes(), size_t{8192 + 8192 + 16384});
}

}  // namespace
}  // namespace ferry::mem
