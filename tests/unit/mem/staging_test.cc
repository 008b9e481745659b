// StagingPool: the copies in-place operations send from are reused once
// nobody holds them, never while someone does, and live in shared memory.
#include "mem/staging.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>

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

// The bridge's pool has a byte limit too (FERRY_BRIDGE_POOL_BYTES): a sweep
// to large sizes does not leave every size it passed kept (pinned), while
// blocks in use are kept whatever the limit.
TEST(StagingPool, IdleBlocksGoToStayUnderTheByteLimit) {
  StagingPool pool(32, 1 << 20);
  for (size_t bytes = 4096; bytes <= (size_t{1} << 20); bytes *= 2) {
    std::shared_ptr<char[]> a = take(pool, bytes), b = take(pool, bytes);
    ASSERT_TRUE(a && b);
    EXPECT_LE(pool.keptBytes(), std::max<size_t>(size_t{1} << 20, 2 * bytes)) << bytes;
  }
  // Nothing held: the last size's two blocks (2 MiB) stay until a take
  // needs room; a small one is served by one of them.
  std::shared_ptr<char[]> small = take(pool, 4096);
  EXPECT_EQ(pool.keptBytes(), size_t{2} << 20);
  // In use, over the limit: both 4 MiB blocks are kept all the same.
  small.reset();
  std::shared_ptr<char[]> x = take(pool, 4 << 20), y = take(pool, 4 << 20);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(pool.keptBytes(), size_t{8} << 20);
}

// The bridge pins its blocks with the job's device (CUDA: page-locked, so
// the device's copies do not hold the caller): once per block and pinner,
// kept blocks stay pinned, and every pin is undone before the block goes.
struct PinLog {
  std::map<void*, int> pinned;  // block -> pins outstanding
  int pins = 0, unpins = 0;
  bool fail = false;
};

BlockPinner pinnerFor(PinLog* log) {
  return BlockPinner{log,
                     [](void* ctx, void* p, size_t) {
                       auto* l = static_cast<PinLog*>(ctx);
                       if (l->fail) return systemError("pin refused");
                       l->pinned[p]++;
                       l->pins++;
                       return Status::ok();
                     },
                     [](void* ctx, void* p) {
                       auto* l = static_cast<PinLog*>(ctx);
                       l->pinned[p]--;
                       l->unpins++;
                     }};
}

TEST(StagingPool, PinsEachBlockOncePerPinnerAndUnpinsBeforeFreeing) {
  PinLog x, y;
  const BlockPinner px = pinnerFor(&x), py = pinnerFor(&y);
  {
    StagingPool pool(1);
    char* kept = nullptr;
    {
      Result<std::shared_ptr<char[]>> a = pool.take(8192, &px);
      ASSERT_TRUE(a.isOk());
      kept = a.value().get();
      EXPECT_EQ(x.pinned[kept], 1);
    }
    Result<std::shared_ptr<char[]>> again = pool.take(4096, &px);  // kept block, pinned already
    ASSERT_TRUE(again.isOk());
    EXPECT_EQ(again.value().get(), kept);
    EXPECT_EQ(x.pins, 1);
    {
      // Held: a second block, fresh and not kept, pinned and unpinned alone.
      Result<std::shared_ptr<char[]>> fresh = pool.take(4096, &px);
      ASSERT_TRUE(fresh.isOk());
      EXPECT_EQ(x.pins, 2);
    }
    EXPECT_EQ(x.unpins, 0) << "unpinned where its last holder let go";
    again = Result<std::shared_ptr<char[]>>(nullptr);  // back to the pool first
    again = pool.take(4096, &py);  // the same kept block, another device
    ASSERT_TRUE(again.isOk());
    EXPECT_EQ(x.unpins, 1) << "the next take unpins the fresh block";
    EXPECT_EQ(y.pinned[kept], 1);
    EXPECT_EQ(x.pins, 2);
    EXPECT_EQ(again.value().get(), kept);
    again = Result<std::shared_ptr<char[]>>(nullptr);
    again = pool.take(4096);  // no pinner: untouched
    ASSERT_TRUE(again.isOk());
    EXPECT_EQ(x.pins + y.pins, 3);
  }  // the pool and its block go
  EXPECT_EQ(x.unpins, 2);
  EXPECT_EQ(y.unpins, 1);
  for (const auto& [p, n] : x.pinned) EXPECT_EQ(n, 0) << p;
  for (const auto& [p, n] : y.pinned) EXPECT_EQ(n, 0) << p;
}

// The bridge's job ends in a stream's host function, where CUDA calls are
// not permitted: a pinned block whose last holder is such a thread waits
// for the next take (or release) on a caller's thread.
TEST(StagingPool, ABlockLastHeldElsewhereIsUnpinnedAndFreedByTheNextTake) {
  PinLog x;
  const BlockPinner px = pinnerFor(&x);
  StagingPool pool(1);
  Result<std::shared_ptr<char[]>> kept = pool.take(8192, &px);
  Result<std::shared_ptr<char[]>> extra = pool.take(8192, &px);  // not kept: `kept` is held
  ASSERT_TRUE(kept.isOk() && extra.isOk());
  char* p = extra.value().get();
  std::thread callback([b = extra.take()]() mutable { b.reset(); });
  callback.join();
  SharedRange r;
  EXPECT_EQ(x.unpins, 0);
  EXPECT_TRUE(lookupShared(p, 1, &r)) << "freed while still pinned";
  ASSERT_TRUE(pool.take(16).isOk());
  EXPECT_EQ(x.unpins, 1);
  EXPECT_EQ(x.pinned[p], 0);
  EXPECT_FALSE(lookupShared(p, 1, &r)) << "unpinned but never freed";
}

TEST(StagingPool, APinThatFailsIsAnErrorAndLeavesNothingBehind) {
  PinLog x;
  x.fail = true;
  const BlockPinner px = pinnerFor(&x);
  StagingPool pool(1);
  Result<std::shared_ptr<char[]>> a = pool.take(8192, &px);
  ASSERT_FALSE(a.isOk());
  EXPECT_NE(a.status().message().find("pin refused"), std::string::npos);
  EXPECT_EQ(pool.keptBytes(), 0u);
  x.fail = false;
  a = pool.take(8192, &px);
  ASSERT_TRUE(a.isOk());
  EXPECT_EQ(x.pins, 1);
}

}  // namespace
}  // namespace ferry::mem
