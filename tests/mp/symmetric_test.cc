// Symmetric windows on real forked ranks (one host): buffers from
// ncclMemAlloc registered with ncclCommWindowRegister run AllReduce,
// ReduceScatter, AllGather and Broadcast as loads and stores on the peers'
// memory (algorithms/symmetric.cc), and Reduce and AlltoAll where the cost
// model or NCCL_ALGO picks it; Gather and Scatter on window buffers take
// the usual algorithms. Checked exactly for 2..5 ranks, several
// sizes, dtypes and ops, in and out of place, with guard elements around
// every output; every rank's TUNING log must name the symmetric algorithm.
// Also: windows on malloc memory register but are not shared (collectives
// still exact, on the usual algorithms); ranks that register different
// sizes, or pass window buffers at different offsets, fail with
// ncclInvalidUsage instead of hanging; a rank killed while the others wait
// in a barrier makes every survivor fail within the timeout.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("sym"); }

// One window per rank: an input area and an output area at fixed offsets
// (the same on every rank, as NCCL's symmetric memory requires).
struct Arena {
  void* base = nullptr;
  size_t bytes = 0;
  ncclWindow_t win = nullptr;
  char* in() const { return static_cast<char*>(base); }
  char* out() const { return static_cast<char*>(base) + bytes / 2; }
};

constexpr size_t kArenaBytes = 16 << 20;
constexpr size_t kGuardElems = 16;

int openArena(const Rank& me, Arena* a) {
  a->bytes = kArenaBytes;
  MP_NCCL(ncclMemAlloc(&a->base, a->bytes));
  MP_NCCL(ncclCommWindowRegister(me.comm, a->base, a->bytes, &a->win, NCCL_WIN_COLL_SYMMETRIC));
  return 0;
}

int closeArena(const Rank& me, Arena* a) {
  MP_NCCL(ncclCommWindowDeregister(me.comm, a->win));
  MP_NCCL(ncclMemFree(a->base));
  return 0;
}

size_t sz(ncclDataType_t dt) { return dtypeSize(dt); }

// Fills `n` elements at p with sentinels (guards and unwritten outputs).
void sentinel(ncclDataType_t dt, void* p, size_t n) {
  for (size_t i = 0; i < n; ++i) encodeValue(dt, sentinelValue(dt), p, i);
}

int checkRange(ncclDataType_t dt, const void* p, size_t n, const std::function<double(size_t)>& want,
               const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    double got = decodeValue(dt, p, i);
    MP_CHECK(got == want(i), "%s: element %zu is %g, expected %g", what.c_str(), i, got, want(i));
  }
  for (size_t i = n; i < n + kGuardElems; ++i)
    MP_CHECK(decodeValue(dt, p, i) == sentinelValue(dt), "%s: guard %zu overwritten", what.c_str(), i - n);
  return 0;
}

// Sentinels over `in` and `out` areas, this rank's inputs into `in`.
void prepare(const Rank& me, const RedCase& c, char* in, size_t inCount, char* out, size_t outCount) {
  sentinel(c.dt, out, outCount + kGuardElems);
  sentinel(c.dt, in, inCount + kGuardElems);
  for (size_t i = 0; i < inCount; ++i) encodeValue(c.dt, redInput(c, me.rank, i), in, i);
}

// Runs call(op) with c's reduction operator created for it.
int withOp(const Rank& me, const RedCase& c, const std::string& what,
           const std::function<ncclResult_t(ncclRedOp_t)>& call) {
  ncclRedOp_t op;
  MP_NCCL(acquireOp(c.op, c.dt, me.comm, &op));
  ncclResult_t r = call(op);
  MP_NCCL(releaseOp(c.op, op, me.comm));
  MP_CHECK(r == ncclSuccess, "%s returned %s", what.c_str(), resultName(r).c_str());
  return 0;
}

int allReduce(const Rank& me, const Arena& a, const RedCase& c, size_t count, bool inPlace) {
  std::string what = "AllReduce " + std::string(opName(c.op)) + " count " + std::to_string(count) +
                     (inPlace ? " in place" : "");
  char* out = inPlace ? a.in() : a.out();
  prepare(me, c, a.in(), count, a.out(), count);
  MP_TRY(withOp(me, c, what, [&](ncclRedOp_t op) {
    return ncclAllReduce(a.in(), out, count, c.dt, op, me.comm, nullptr);
  }));
  return checkRange(c.dt, out, count, [&](size_t i) { return redExpected(c, i); }, what);
}

int reduceScatter(const Rank& me, const Arena& a, const RedCase& c, size_t count, bool inPlace) {
  std::string what = "ReduceScatter count " + std::to_string(count) + (inPlace ? " in place" : "");
  size_t total = count * me.nranks;
  char* out = inPlace ? a.in() + me.rank * count * sz(c.dt) : a.out();
  prepare(me, c, a.in(), total, a.out(), count);
  MP_TRY(withOp(me, c, what, [&](ncclRedOp_t op) {
    return ncclReduceScatter(a.in(), out, count, c.dt, op, me.comm, nullptr);
  }));
  size_t base = me.rank * count;
  // In place the guard after my block is the next rank's input block.
  if (inPlace && me.rank + 1 < me.nranks) {
    for (size_t i = 0; i < count; ++i)
      MP_CHECK(decodeValue(c.dt, out, i) == redExpected(c, base + i), "%s: element %zu", what.c_str(), i);
    return 0;
  }
  return checkRange(c.dt, out, count, [&](size_t i) { return redExpected(c, base + i); }, what);
}

// The root's output holds the result; elsewhere nothing is written (a
// non-root's output keeps its sentinels, its input its values).
int reduce(const Rank& me, const Arena& a, const RedCase& c, size_t count, int root, bool inPlace) {
  std::string what = "Reduce " + std::string(opName(c.op)) + " count " + std::to_string(count) + " root " +
                     std::to_string(root) + (inPlace ? " in place" : "");
  char* out = inPlace ? a.in() : a.out();
  prepare(me, c, a.in(), count, a.out(), count);
  MP_TRY(withOp(me, c, what, [&](ncclRedOp_t op) {
    return ncclReduce(a.in(), out, count, c.dt, op, root, me.comm, nullptr);
  }));
  if (me.rank == root) return checkRange(c.dt, out, count, [&](size_t i) { return redExpected(c, i); }, what);
  if (inPlace) return checkRange(c.dt, out, count, [&](size_t i) { return redInput(c, me.rank, i); }, what);
  return checkRange(c.dt, out, count, [&](size_t) { return sentinelValue(c.dt); }, what);
}

int allGather(const Rank& me, const Arena& a, ncclDataType_t dt, size_t count, bool inPlace) {
  std::string what = "AllGather count " + std::to_string(count) + (inPlace ? " in place" : "");
  size_t total = count * me.nranks;
  char* in = inPlace ? a.out() + me.rank * count * sz(dt) : a.in();
  sentinel(dt, a.out(), total + kGuardElems);
  for (size_t i = 0; i < count; ++i) encodeValue(dt, moveValue(dt, me.rank, i), in, i);
  MP_NCCL(ncclAllGather(in, a.out(), count, dt, me.comm, nullptr));
  return checkRange(dt, a.out(), total,
                    [&](size_t i) { return moveValue(dt, int(i / count), i % count); }, what);
}

int broadcast(const Rank& me, const Arena& a, ncclDataType_t dt, size_t count, int root, bool inPlace) {
  std::string what = "Broadcast count " + std::to_string(count) + " root " + std::to_string(root) +
                     (inPlace ? " in place" : "");
  char* in = inPlace ? a.out() : a.in();
  sentinel(dt, a.out(), count + kGuardElems);
  if (me.rank == root)
    for (size_t i = 0; i < count; ++i) encodeValue(dt, moveValue(dt, root, i), in, i);
  MP_NCCL(ncclBroadcast(in, a.out(), count, dt, root, me.comm, nullptr));
  return checkRange(dt, a.out(), count, [&](size_t i) { return moveValue(dt, root, i); }, what);
}

// AlltoAll: block p of rank r's output is block r of rank p's input.
int allToAll(const Rank& me, const Arena& a, ncclDataType_t dt, size_t count, bool inPlace) {
  std::string what = "AlltoAll count " + std::to_string(count) + (inPlace ? " in place" : "");
  size_t total = count * me.nranks;
  char* in = inPlace ? a.out() : a.in();
  sentinel(dt, a.out(), total + kGuardElems);
  for (size_t i = 0; i < total; ++i) encodeValue(dt, moveValue(dt, me.rank, i), in, i);
  MP_NCCL(ncclAlltoAll(in, a.out(), count, dt, me.comm, nullptr));
  return checkRange(dt, a.out(), total,
                    [&](size_t i) { return moveValue(dt, int(i / count), me.rank * count + i % count); }, what);
}

// Gather and Scatter have no symmetric form (their in-place buffers sit at
// each rank's own block, as here, nccl-tests' layout): window buffers take
// the usual algorithms, exactly.
int gather(const Rank& me, const Arena& a, ncclDataType_t dt, size_t count, int root, bool inPlace) {
  std::string what = "Gather count " + std::to_string(count) + " root " + std::to_string(root) +
                     (inPlace ? " in place" : "");
  size_t total = count * me.nranks;
  char* in = inPlace ? a.out() + me.rank * count * sz(dt) : a.in();
  sentinel(dt, a.out(), total + kGuardElems);
  for (size_t i = 0; i < count; ++i) encodeValue(dt, moveValue(dt, me.rank, i), in, i);
  MP_NCCL(ncclGather(in, a.out(), count, dt, root, me.comm, nullptr));
  if (me.rank == root)
    return checkRange(dt, a.out(), total, [&](size_t i) { return moveValue(dt, int(i / count), i % count); }, what);
  if (inPlace) return checkRange(dt, in, count, [&](size_t i) { return moveValue(dt, me.rank, i); }, what);
  return checkRange(dt, a.out(), total, [&](size_t) { return sentinelValue(dt); }, what);
}

int scatter(const Rank& me, const Arena& a, ncclDataType_t dt, size_t count, int root, bool inPlace) {
  std::string what = "Scatter count " + std::to_string(count) + " root " + std::to_string(root) +
                     (inPlace ? " in place" : "");
  size_t total = count * me.nranks;
  char* out = inPlace ? a.in() + me.rank * count * sz(dt) : a.out();
  sentinel(dt, a.in(), total + kGuardElems);
  if (!inPlace) sentinel(dt, out, count + kGuardElems);
  if (me.rank == root)
    for (size_t i = 0; i < total; ++i) encodeValue(dt, moveValue(dt, root, i), a.in(), i);
  MP_NCCL(ncclScatter(a.in(), out, count, dt, root, me.comm, nullptr));
  auto expect = [&](size_t i) { return moveValue(dt, root, me.rank * count + i); };
  if (inPlace && me.rank + 1 < me.nranks) {  // the guard is the next block
    for (size_t i = 0; i < count; ++i)
      MP_CHECK(decodeValue(dt, out, i) == expect(i), "%s: element %zu", what.c_str(), i);
    return 0;
  }
  return checkRange(dt, out, count, expect, what);
}

int everyCollective(const Rank& me, const Arena& a) {
  std::vector<RedCase> cases = standardReductions(me.nranks);
  cases.push_back({ncclInt8, TestOp::kProd, me.nranks});
  cases.push_back({ncclFloat64, TestOp::kMin, me.nranks});
  for (bool inPlace : {false, true}) {
    for (const RedCase& c : cases)
      for (size_t count : {size_t{1}, size_t{7}, size_t{5000}}) MP_TRY(allReduce(me, a, c, count, inPlace));
    MP_TRY(allReduce(me, a, {ncclInt32, TestOp::kSum, me.nranks}, 1000003, inPlace));
    for (const RedCase& c : cases)
      for (size_t count : {size_t{1}, size_t{700}, size_t{100001}}) MP_TRY(reduceScatter(me, a, c, count, inPlace));
    for (ncclDataType_t dt : {ncclInt32, ncclUint8, ncclFloat64})
      for (size_t count : {size_t{1}, size_t{700}, size_t{100001}}) MP_TRY(allGather(me, a, dt, count, inPlace));
    for (int root : {0, me.nranks - 1}) {
      for (size_t count : {size_t{3}, size_t{300001}}) MP_TRY(broadcast(me, a, ncclInt32, count, root, inPlace));
      for (const RedCase& c : cases)
        for (size_t count : {size_t{1}, size_t{700}, size_t{100001}}) MP_TRY(reduce(me, a, c, count, root, inPlace));
      for (ncclDataType_t dt : {ncclInt32, ncclUint8, ncclFloat64})
        for (size_t count : {size_t{1}, size_t{700}, size_t{100001}}) {
          MP_TRY(gather(me, a, dt, count, root, inPlace));
          MP_TRY(scatter(me, a, dt, count, root, inPlace));
        }
    }
    for (ncclDataType_t dt : {ncclInt32, ncclUint8, ncclFloat64})
      for (size_t count : {size_t{1}, size_t{700}, size_t{100001}}) MP_TRY(allToAll(me, a, dt, count, inPlace));
  }
  return 0;
}

int symmetricBody(int rank, int n, const ncclUniqueId& id) {
  return withComm(rank, n, id, [](const Rank& me) {
    Arena a;
    MP_TRY(openArena(me, &a));
    MP_TRY(everyCollective(me, a));
    return closeArena(me, &a);
  });
}

RunOptions opts(const std::string& tag, Env env = {}) {
  return loggedOptions(logDir(), tag, "TUNING,INIT", std::move(env), 240);
}

class MpSymmetric : public ::testing::TestWithParam<int> {};

TEST_P(MpSymmetric, EveryCollectiveExact) {
  int n = GetParam();
  std::string tag = "all" + std::to_string(n);
  RunResult res = runRanks(n, symmetricBody, opts(tag));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), tag, "shared by every rank (symmetric collectives)"), n);
  for (const char* line : {"AllReduce count 1000003 elemSize 4: algorithm symmetric",
                           "ReduceScatter count 100001 elemSize 4: algorithm symmetric",
                           "AllGather count 100001 elemSize 4: algorithm symmetric",
                           "Broadcast count 300001 elemSize 4: algorithm symmetric"}) {
    // AllGather on 2 ranks: symmetric copies 2 blocks at memcpy speed, the
    // ring 1 block at half of it, so the model has them equal but for
    // sub-microsecond latency terms; which wins depends on the machine's
    // calibration (ring here by 0.1 us of 20.4). From 3 ranks symmetric
    // moves n blocks against the ring's 2(n-1) and must win.
    if (n == 2 && std::string(line).rfind("AllGather", 0) == 0) continue;
    EXPECT_EQ(logFilesWith(logDir(), tag, line), n) << line;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpSymmetric, ::testing::Values(2, 3, 4, 5));

// NCCL_ALGO=symmetric forces it at every size (8 bytes too), AlltoAll by
// its own clause (NCCL's rule: a list without a prefix names NCCL's five
// tunable collectives).
TEST(MpSymmetricForced, SmallAndLargeExact) {
  RunResult res = runRanks(4, symmetricBody, opts("forced", {{"NCCL_ALGO", "symmetric;AlltoAll:symmetric"}}));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "forced", "AllReduce count 1 elemSize 4: algorithm symmetric"), 4);
  for (const char* line : {"Reduce count 100001 elemSize 4: algorithm symmetric",
                           "AlltoAll count 1 elemSize 1: algorithm symmetric",
                           "AlltoAll count 100001 elemSize 8: algorithm symmetric"})
    EXPECT_EQ(logFilesWith(logDir(), "forced", line), 4) << line;
}

// Whether a Broadcast is in place is the root's alone to know (a
// non-root's input is ignored): the root must choose the algorithm the
// others choose. At 3 ranks and 2-8 KiB the root in place once costed
// symmetric cheaper than the others did, took it while they took another,
// and every rank hung until the timeout.
TEST(MpSymmetric, BroadcastWithTheRootInPlaceAgrees) {
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      Arena a;
      MP_TRY(openArena(me, &a));
      // Every size up to 1 MiB in steps of a fifth (where the algorithms'
      // costs cross depends on this machine's calibration).
      for (size_t count = 1; count <= (size_t(1) << 18); count = count * 6 / 5 + 1)
        MP_TRY(broadcast(me, a, ncclInt32, count, 0, me.rank == 0));
      return closeArena(me, &a);
    });
  }, opts("rootinplace", {{"FERRY_TIMEOUT_MS", "20000"}}));
  EXPECT_RANKS_OK(res);
}

// ncclMemAlloc buffers without windows, on the FIFO algorithms: large
// pieces travel as references the receiver maps and reads in place. The
// buffers are freed and allocated again between rounds (the new memfd
// usually gets the old fd number, often the old address): a receiver must
// map the new allocation, not reuse the mapping of the freed one.
TEST(MpSymmetric, MemAllocBuffersReadInPlace) {
  for (const char* algo : {"ring", "direct"}) {
    std::string tag = std::string("memalloc-") + algo;
    RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
      return withComm(rank, n, id, [](const Rank& me) {
        for (int round = 0; round < 2; ++round) {
          Arena a;
          a.bytes = kArenaBytes;
          MP_NCCL(ncclMemAlloc(&a.base, a.bytes));
          MP_TRY(everyCollective(me, a));
          MP_NCCL(ncclMemFree(a.base));
        }
        return 0;
      });
    }, opts(tag, {{"NCCL_ALGO", algo}, {"NCCL_DEBUG_SUBSYS", "TUNING,INIT,SHM"}}));
    EXPECT_RANKS_OK(res);
    EXPECT_GE(logFilesWith(logDir(), tag, "ncclMemAlloc allocation"), 1) << algo;
    EXPECT_EQ(logFilesWith(logDir(), tag, "algorithm symmetric"), 0) << algo;
  }
}

// Windows over malloc memory: registered, not shared; still exact.
TEST(MpSymmetric, MallocWindowsNotShared) {
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      std::vector<char> mem(kArenaBytes);
      Arena a{mem.data(), mem.size(), nullptr};
      MP_NCCL(ncclCommWindowRegister(me.comm, a.base, a.bytes, &a.win, NCCL_WIN_COLL_SYMMETRIC));
      MP_TRY(allReduce(me, a, {ncclInt32, TestOp::kSum, me.nranks}, 100000, false));
      MP_NCCL(ncclCommWindowDeregister(me.comm, a.win));
      return 0;
    });
  }, opts("malloc"));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "malloc", "not shared: rank"), 3);
  EXPECT_EQ(logFilesWith(logDir(), "malloc", "algorithm symmetric"), 0);
}

// Sizes that differ between ranks: every rank's registration fails.
TEST(MpSymmetric, DifferentSizesRefused) {
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      void* p = nullptr;
      MP_NCCL(ncclMemAlloc(&p, 1 << 20));
      ncclWindow_t w = nullptr;
      size_t bytes = me.rank == 1 ? 4096 : 8192;
      ncclResult_t r = ncclCommWindowRegister(me.comm, p, bytes, &w, NCCL_WIN_COLL_SYMMETRIC);
      MP_CHECK(r == ncclInvalidUsage, "rank %d: register returned %s", me.rank, resultName(r).c_str());
      MP_NCCL(ncclMemFree(p));
      return 0;
    });
  }, opts("sizes"));
  EXPECT_RANKS_OK(res);
}

// Rank 1 passes its buffers at another offset of the window: the ranks'
// descriptors differ at the first barrier and every rank fails (symmetric
// forced: at this size the model might pick a FIFO algorithm, which is
// right to accept any buffers).
TEST(MpSymmetric, MismatchedOffsetsFailEveryRank) {
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      Arena a;
      MP_TRY(openArena(me, &a));
      size_t shift = me.rank == 1 ? 4096 : 0;
      ncclResult_t r = ncclAllReduce(a.in() + shift, a.out(), 1000, ncclInt32, ncclSum, me.comm, nullptr);
      MP_CHECK(r == ncclInvalidUsage, "rank %d: AllReduce returned %s", me.rank, resultName(r).c_str());
      return 0;
    });
  }, opts("offsets", {{"NCCL_ALGO", "symmetric"}}));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "offsets", "ranks disagree on a collective over symmetric windows"), 3);
}

// A rank dies while the others loop on symmetric AllReduces: the survivors
// fail (liveness checks of the barrier's peers), well within the timeout.
TEST(MpSymmetric, KilledRankFailsSurvivors) {
  RunOptions o = killAtReadyOptions(2, 20, 10000, 100);
  RunResult res = runRanks(4, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    MP_NCCL(initComm(&comm, n, id, rank));
    Rank me{comm, rank, n};
    Arena a;
    MP_TRY(openArena(me, &a));
    ncclResult_t r = ncclSuccess;
    int64_t deadline = monoNs() + int64_t(60000) * 1000000;
    for (int iter = 0; r == ncclSuccess; ++iter) {
      if (rank == 2 && iter == 3) harnessSignalReady();
      r = ncclAllReduce(a.in(), a.out(), 1 << 20, ncclFloat32, ncclSum, comm, nullptr);
      MP_CHECK(monoNs() < deadline, "rank %d: no error 60 s into the loop", rank);
    }
    MP_CHECK(r == ncclRemoteError || r == ncclSystemError, "survivor %d: %s", rank, resultName(r).c_str());
    ncclCommAbort(comm);
    return 0;
  }, o);
  ASSERT_RANKS_OK(res);
  EXPECT_TRUE(res.ranks[2].killedByHarness) << res.summary();
}

}  // namespace
}  // namespace ferry::mp
