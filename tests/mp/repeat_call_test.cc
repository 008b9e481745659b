// Repeated standalone calls (src/comm/repeat_call.h): a collective called
// again with the same arguments skips the checks and the plan lookup (a
// Send/Recv group repeated on the same buffers, the op list). These
// tests cover what could make the shortcut wrong: new data in the same
// buffers, the plan evicted between repeats, a PreMulSum op destroyed and
// its number reused with another scalar, and symmetric windows registered
// after only some ranks had a remembered call (those ranks would skip the
// window binding the others do, and the ranks would run different
// schedules: a hang or wrong values).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

RunOptions opts(int timeoutSec) {
  RunOptions o;
  o.timeoutSec = timeoutSec;
  o.env["FERRY_TIMEOUT_MS"] = "15000";
  return o;
}

// sum over ranks of (r + 1) * (i + 1) + round
int32_t want(int nranks, size_t i, int round) {
  return int32_t(nranks * (nranks + 1) / 2 * (i + 1)) + nranks * round;
}

// out[count] (callers leave room for it) guards against a call that ran
// with another call's count.
int allReduceRound(const Rank& me, int32_t* in, int32_t* out, size_t count, int round) {
  for (size_t i = 0; i < count; ++i) in[i] = int32_t((me.rank + 1) * (i + 1)) + round;
  out[count] = -7;
  MP_NCCL(ncclAllReduce(in, out, count, ncclInt32, ncclSum, me.comm, nullptr));
  MP_CHECK(out[count] == -7, "round %d: count %zu wrote past its end", round, count);
  for (size_t i = 0; i < count; ++i)
    MP_CHECK(out[i] == want(me.nranks, i, round), "round %d element %zu: %d, want %d", round, i,
             out[i], want(me.nranks, i, round));
  return 0;
}

TEST(MpRepeatCall, SameArgumentsNewDataExact) {
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      constexpr size_t kCount = 1000;
      std::vector<int32_t> in(kCount), out(kCount + 1), bc(kCount);
      for (int round = 0; round < 30; ++round) {
        MP_TRY(allReduceRound(me, in.data(), out.data(), kCount, round));
        for (size_t i = 0; i < kCount; ++i) bc[i] = me.rank == 1 ? int32_t(i) * 3 + round : -1;
        MP_NCCL(ncclBroadcast(bc.data(), bc.data(), kCount, ncclInt32, 1, me.comm, nullptr));
        for (size_t i = 0; i < kCount; ++i)
          MP_CHECK(bc[i] == int32_t(i) * 3 + round, "broadcast round %d element %zu: %d", round, i, bc[i]);
      }
      return 0;
    });
  }, opts(120));
  EXPECT_RANKS_OK(res);
}

// An in-place AlltoAll works on a copy of its input, which a remembered
// call must take again on every call (a stale copy would deliver the
// previous round's blocks).
TEST(MpRepeatCall, InPlaceAlltoAllCopiesEachRound) {
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      constexpr size_t kCount = 5;  // per peer block
      std::vector<int32_t> buf(kCount * me.nranks);
      auto value = [](int from, int to, size_t i, int round) {
        return int32_t(from * 1000 + to * 100 + int(i) * 7 + round);
      };
      for (int round = 0; round < 20; ++round) {
        for (int to = 0; to < me.nranks; ++to)
          for (size_t i = 0; i < kCount; ++i) buf[to * kCount + i] = value(me.rank, to, i, round);
        MP_NCCL(ncclAlltoAll(buf.data(), buf.data(), kCount, ncclInt32, me.comm, nullptr));
        for (int from = 0; from < me.nranks; ++from)
          for (size_t i = 0; i < kCount; ++i)
            MP_CHECK(buf[from * kCount + i] == value(from, me.rank, i, round),
                     "round %d block %d element %zu: %d, want %d", round, from, i,
                     buf[from * kCount + i], value(from, me.rank, i, round));
      }
      return 0;
    });
  }, opts(120));
  EXPECT_RANKS_OK(res);
}

// In-place AlltoAlls on buffers that rotate (a benchmark's, a model's
// layers): each call's copy comes from the communicator's staging pool and
// goes back when the call returns, so one shared block serves them all.
// Remembered calls once held their copies, and every call of more
// alternating buffers than calls remembered mapped a fresh shared block (0.4-1.9 ms per 64-256
// KiB call against 5-20 us out of place).
TEST(MpRepeatCall, InPlaceAlltoAllOnRotatingBuffersReusesOneBlock) {
  const std::string dir = testLogDir("repeat");
  RunResult res = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      constexpr size_t kCount = 4096;  // per peer block
      // More buffers than RepeatCalls remembers calls.
      std::vector<std::vector<int32_t>> bufs(6, std::vector<int32_t>(kCount * me.nranks));
      for (int round = 0; round < 30; ++round) {
        std::vector<int32_t>& buf = bufs[round % bufs.size()];
        for (size_t j = 0; j < buf.size(); ++j) buf[j] = int32_t(me.rank * 1000000 + j * 3 + round);
        MP_NCCL(ncclAlltoAll(buf.data(), buf.data(), kCount, ncclInt32, me.comm, nullptr));
        for (int from = 0; from < me.nranks; ++from)
          for (size_t i = 0; i < kCount; ++i) {
            int32_t want = int32_t(from * 1000000 + (me.rank * kCount + i) * 3 + round);
            MP_CHECK(buf[from * kCount + i] == want, "round %d block %d element %zu: %d, want %d", round, from,
                     i, buf[from * kCount + i], want);
          }
      }
      return 0;
    });
  }, loggedOptions(dir, "rotate", "ALLOC", {{"FERRY_TIMEOUT_MS", "15000"}}, 120));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(dir, "rotate", "staging: a new shared block"), 2);
  int made = maxLinesWith(dir, "rotate", "staging: a new shared block");
  EXPECT_LE(made, 2) << "a rank made " << made << " staging blocks for 30 calls";
}

// A group of 70 other shapes between two repeats evicts the first call's
// plan (the cache keeps 64) but leaves the remembered call (groups are not
// remembered): the repeat must build the plan again, not run whatever plan
// took its place, nor a freed one.
TEST(MpRepeatCall, PlanEvictedBetweenRepeats) {
  RunResult res = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      std::vector<int32_t> in(200), out(201), scratch(200);
      MP_TRY(allReduceRound(me, in.data(), out.data(), 100, 0));
      MP_TRY(allReduceRound(me, in.data(), out.data(), 100, 1));
      MP_NCCL(ncclGroupStart());
      for (size_t count = 101; count < 171; ++count)
        MP_NCCL(ncclAllReduce(scratch.data(), scratch.data(), count, ncclInt32, ncclSum, me.comm, nullptr));
      MP_NCCL(ncclGroupEnd());
      MP_TRY(allReduceRound(me, in.data(), out.data(), 100, 3));
      MP_TRY(allReduceRound(me, in.data(), out.data(), 100, 4));
      return 0;
    });
  }, opts(120));
  EXPECT_RANKS_OK(res);
}

// Send/Recv groups repeat too (repeat_call.h, P2pRepeat): the last group's
// executor runs again when the operations and buffers are the same. Two
// buffer sets of one shape alternate (the shared plan is rebound to the
// other set in between), and 70 groups of other shapes evict the plan
// between two repeats: every round's values must land in its own buffers.
int ringRound(const Rank& me, int32_t* send, int32_t* recv, size_t count, int round) {
  int next = (me.rank + 1) % me.nranks, prev = (me.rank + me.nranks - 1) % me.nranks;
  for (size_t i = 0; i < count; ++i) send[i] = me.rank * 100000 + int32_t(i) + round;
  recv[count] = -7;
  MP_NCCL(ncclGroupStart());
  MP_NCCL(ncclSend(send, count, ncclInt32, next, me.comm, nullptr));
  MP_NCCL(ncclRecv(recv, count, ncclInt32, prev, me.comm, nullptr));
  MP_NCCL(ncclGroupEnd());
  MP_CHECK(recv[count] == -7, "round %d: wrote past the receive", round);
  for (size_t i = 0; i < count; ++i)
    MP_CHECK(recv[i] == prev * 100000 + int32_t(i) + round, "round %d element %zu: %d", round, i, recv[i]);
  return 0;
}

// In-place Send/Recv groups (a send overlapping a receive) likewise: new
// groups, repeats (A A) and switches (A B) all send from the pool's one
// block; the remembered group once held its copy, and every other group
// of two alternating buffers mapped a fresh one.
TEST(MpRepeatCall, InPlaceSendRecvReusesOneBlock) {
  const std::string dir = testLogDir("repeat");
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      constexpr size_t kCount = 4096;
      std::vector<int32_t> a(kCount + 1), b(kCount + 1);
      for (int round = 0; round < 32; ++round) {
        // A A B B ... (repeats and switches), then A B A B ...
        bool useA = round < 16 ? (round / 2) % 2 == 0 : round % 2 == 0;
        int32_t* buf = useA ? a.data() : b.data();
        MP_TRY(ringRound(me, buf, buf, kCount, round));
      }
      return 0;
    });
  }, loggedOptions(dir, "p2pcopy", "ALLOC", {{"FERRY_TIMEOUT_MS", "15000"}}, 120));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(dir, "p2pcopy", "staging: a new shared block"), 3);
  int made = maxLinesWith(dir, "p2pcopy", "staging: a new shared block");
  EXPECT_LE(made, 2) << "a rank made " << made << " staging blocks for 32 groups";
}

TEST(MpRepeatCall, SendRecvGroupsRepeatIntoTheirOwnBuffers) {
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      constexpr size_t kCount = 500;
      std::vector<int32_t> sa(kCount), ra(kCount + 1), sb(kCount), rb(kCount + 1), scratch(200);
      for (int round = 0; round < 24; ++round) {
        // A A C A B B, again and again: repeats, switches, and an in-place
        // group C (not remembered: it sends from a copy) between two A's,
        // so the second A repeats the plan C rebound.
        int k = round % 6;
        int32_t* send = k < 4 ? sa.data() : sb.data();
        int32_t* recv = k < 4 ? ra.data() : rb.data();
        if (k == 2) send = recv = rb.data();
        MP_TRY(ringRound(me, send, recv, kCount, round));
      }
      int next = (me.rank + 1) % me.nranks, prev = (me.rank + me.nranks - 1) % me.nranks;
      for (size_t count = 101; count < 171; ++count) {
        MP_NCCL(ncclGroupStart());
        MP_NCCL(ncclSend(scratch.data(), count, ncclInt8, next, me.comm, nullptr));
        MP_NCCL(ncclRecv(scratch.data() + 100, count, ncclInt8, prev, me.comm, nullptr));
        MP_NCCL(ncclGroupEnd());
      }
      MP_TRY(ringRound(me, sa.data(), ra.data(), kCount, 100));
      MP_TRY(ringRound(me, sa.data(), ra.data(), kCount, 101));
      return 0;
    });
  }, opts(120));
  EXPECT_RANKS_OK(res);
}

// Same buffers, same op number, another scalar: never a remembered call.
TEST(MpRepeatCall, PreMulSumRecreatedWithAnotherScalar) {
  RunResult res = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      std::vector<int32_t> in(64, me.rank + 1), out(64);
      for (int32_t scalar : {2, 3, 5}) {
        ncclRedOp_t op;
        MP_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, ncclInt32, ncclScalarHostImmediate, me.comm));
        for (int k = 0; k < 2; ++k) {
          MP_NCCL(ncclAllReduce(in.data(), out.data(), in.size(), ncclInt32, op, me.comm, nullptr));
          for (size_t i = 0; i < out.size(); ++i)
            MP_CHECK(out[i] == scalar * 3, "scalar %d call %d element %zu: %d", scalar, k, i, out[i]);
        }
        MP_NCCL(ncclRedOpDestroy(op, me.comm));
      }
      return 0;
    });
  }, opts(60));
  EXPECT_RANKS_OK(res);
}

// Rank 0 repeats AllReduce on its window-to-be, rank 1 on other memory;
// after every rank registered the windows, all must bind them alike.
TEST(MpRepeatCall, WindowsRegisteredAfterSomeRanksRepeated) {
  RunResult res = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      constexpr size_t kCount = 4096;
      size_t bytes = (2 * kCount + 1) * sizeof(int32_t);
      void* base = nullptr;
      MP_NCCL(ncclMemAlloc(&base, bytes));
      auto* in = static_cast<int32_t*>(base);
      int32_t* out = in + kCount;
      std::vector<int32_t> otherIn(kCount), otherOut(kCount + 1);
      for (int round = 0; round < 2; ++round) {
        if (me.rank == 0) MP_TRY(allReduceRound(me, in, out, kCount, round));
        else MP_TRY(allReduceRound(me, otherIn.data(), otherOut.data(), kCount, round));
      }
      ncclWindow_t win;
      MP_NCCL(ncclCommWindowRegister(me.comm, base, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
      for (int round = 2; round < 5; ++round) MP_TRY(allReduceRound(me, in, out, kCount, round));
      MP_NCCL(ncclCommWindowDeregister(me.comm, win));
      MP_TRY(allReduceRound(me, in, out, kCount, 5));
      MP_NCCL(ncclMemFree(base));
      return 0;
    });
  }, opts(60));
  EXPECT_RANKS_OK(res);
}

// Large AlltoAll and Send/Recv pieces go by reference or by value as each
// rank's executor chooses from its run times (src/exec/ref_choice.h); its
// trials switch the way mid-stream, and ranks may choose differently. Every
// round must stay exact through those switches.
TEST(MpRepeatCall, LargeExchangesExactWhileTheirWayIsChosen) {
  const std::string& dir = testLogDir("repeat");
  RunResult res = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      constexpr size_t kCount = size_t(1) << 20;  // int32 per block: 4 MiB, the threshold
      std::vector<int32_t> in(kCount * me.nranks), out(kCount * me.nranks), got(kCount);
      auto value = [](int from, int to, size_t i, int round) {
        return int32_t(from * 100000000 + to * 10000000 + int(i) + round * 3);
      };
      int peer = 1 - me.rank;
      for (int round = 0; round < 28; ++round) {
        for (int to = 0; to < me.nranks; ++to)
          for (size_t i = 0; i < kCount; ++i) in[to * kCount + i] = value(me.rank, to, i, round);
        MP_NCCL(ncclAlltoAll(in.data(), out.data(), kCount, ncclInt32, me.comm, nullptr));
        for (int from = 0; from < me.nranks; ++from)
          for (size_t i = 0; i < kCount; ++i)
            MP_CHECK(out[from * kCount + i] == value(from, me.rank, i, round),
                     "AlltoAll round %d block %d element %zu: %d", round, from, i, out[from * kCount + i]);
        MP_NCCL(ncclGroupStart());
        MP_NCCL(ncclSend(in.data() + peer * kCount, kCount, ncclInt32, peer, me.comm, nullptr));
        MP_NCCL(ncclRecv(got.data(), kCount, ncclInt32, peer, me.comm, nullptr));
        MP_NCCL(ncclGroupEnd());
        for (size_t i = 0; i < kCount; ++i)
          MP_CHECK(got[i] == value(peer, me.rank, i, round), "Send/Recv round %d element %zu: %d",
                   round, i, got[i]);
      }
      return 0;
    });
  }, loggedOptions(dir, "refchoice", "COLL", {{"FERRY_TIMEOUT_MS", "30000"}}, 120));
  EXPECT_RANKS_OK(res);
  // Both ranks tried the other way (8 runs open a choice; 28 passed).
  EXPECT_EQ(logFilesWith(dir, "refchoice", "reference choice ("), 2);
}

// A Scatter root only sends: it times its runs only around a trial, in
// blocks whose last run waits until the receivers took every piece
// (RefChoice::waitsForPeers), and runs ahead of them in between. Every
// round must stay exact, and the root (alone) must have judged a trial.
TEST(MpRepeatCall, ScatterRootChoosesItsWayWhileRoundsStayExact) {
  const std::string& dir = testLogDir("repeat");
  RunResult res = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      constexpr size_t kCount = size_t(1) << 20;  // int32 per block: 4 MiB, the threshold
      std::vector<int32_t> in(kCount * me.nranks), out(kCount);
      for (int round = 0; round < 34; ++round) {
        if (me.rank == 0)
          for (size_t i = 0; i < in.size(); ++i) in[i] = int32_t(i) * 7 + round;
        MP_NCCL(ncclScatter(in.data(), out.data(), kCount, ncclInt32, 0, me.comm, nullptr));
        for (size_t i = 0; i < kCount; ++i) {
          int32_t want = int32_t(me.rank * kCount + i) * 7 + round;
          MP_CHECK(out[i] == want, "Scatter round %d element %zu: %d, want %d", round, i, out[i], want);
        }
      }
      return 0;
    });
  }, loggedOptions(dir, "scatterchoice", "COLL", {{"FERRY_TIMEOUT_MS", "30000"}}, 120));
  EXPECT_RANKS_OK(res);
  // The root's first verdict comes after 26 runs (two stretches of a
  // draining run and three blocks of four); the receiver sends nothing.
  EXPECT_EQ(logFilesWith(dir, "scatterchoice", "reference choice ("), 1);
}

}  // namespace
}  // namespace ferry::mp
