// Point-to-point and group semantics through libferry.so, exact values:
//  - ring Send/Recv for several datatypes, counts (0 .. 1M+3) and rank counts;
//  - all-pairs exchange inside one group (self included), uniform and with a
//    different count for every (sender, receiver) pair, posted in a
//    rank-dependent order;
//  - Send/Recv outside a group, ordered even/odd so it cannot deadlock;
//  - one group holding several collectives and send/recv together, and a
//    group of many AllReduces on distinct buffers.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

RunOptions opts(int timeoutSec) {
  RunOptions o;
  o.timeoutSec = timeoutSec;
  o.env["FERRY_TIMEOUT_MS"] = "20000";
  return o;
}

TEST(MpP2p, RingManyTypesAndCounts) {
  for (int n : {2, 3, 5}) {
    RunResult res = runRanks(
        n,
        [](int rank, int nr, const ncclUniqueId& id) {
          return withComm(rank, nr, id, [](const Rank& me) {
            for (ncclDataType_t dt : {ncclInt8, ncclFloat16, ncclFloat32, ncclUint64, ncclFloat8e5m2})
              for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(4099)})
                MP_TRY(caseSendRecvRing(me, dt, count));
            MP_TRY(caseSendRecvRing(me, ncclFloat32, (size_t(1) << 20) + 3));
            return 0;
          });
        },
        opts(120));
    EXPECT_RANKS_OK(res) << "nranks " << n;
  }
}

TEST(MpP2p, SelfSendRecvOneRank) {
  RunResult res = runRanks(
      1,
      [](int rank, int nr, const ncclUniqueId& id) {
        return withComm(rank, nr, id, [](const Rank& me) {
          MP_TRY(caseSendRecvRing(me, ncclFloat64, 7));
          MP_TRY(caseSendRecvAllPairs(me, ncclInt32, 100000));
          return 0;
        });
      },
      opts(60));
  EXPECT_RANKS_OK(res);
}

TEST(MpP2p, AllPairsUniform) {
  RunResult res = runRanks(
      4,
      [](int rank, int nr, const ncclUniqueId& id) {
        return withComm(rank, nr, id, [](const Rank& me) {
          for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(300001)})
            MP_TRY(caseSendRecvAllPairs(me, ncclFloat32, count));
          MP_TRY(caseSendRecvAllPairs(me, ncclBfloat16, 33));
          return 0;
        });
      },
      opts(120));
  EXPECT_RANKS_OK(res);
}

// Count sent from rank s to rank d: different for every ordered pair, 0 for some.
size_t pairCount(int s, int d) { return size_t((s * 5 + d * 3) % 7) * 1000 + size_t(s == d ? 0 : s + d); }

int allPairsUneven(const Rank& me) {
  const int n = me.nranks;
  std::vector<std::unique_ptr<HostBuf>> send(n), recv(n);
  for (int p = 0; p < n; ++p) {
    send[p] = std::make_unique<HostBuf>(ncclInt32, pairCount(me.rank, p));
    recv[p] = std::make_unique<HostBuf>(ncclInt32, pairCount(p, me.rank));
    send[p]->fill([&](size_t i) { return moveValue(ncclInt32, me.rank * 100 + p, i); });
    recv[p]->fill(sentinelValue(ncclInt32));
  }
  MP_NCCL(ncclGroupStart());
  for (int k = 0; k < n; ++k) {
    // Odd ranks post peers in reverse order, and receives before sends.
    int p = (me.rank % 2) ? n - 1 - k : k;
    if (me.rank % 2) {
      MP_NCCL(ncclRecv(recv[p]->data(), recv[p]->count(), ncclInt32, p, me.comm, nullptr));
      MP_NCCL(ncclSend(send[p]->data(), send[p]->count(), ncclInt32, p, me.comm, nullptr));
    } else {
      MP_NCCL(ncclSend(send[p]->data(), send[p]->count(), ncclInt32, p, me.comm, nullptr));
      MP_NCCL(ncclRecv(recv[p]->data(), recv[p]->count(), ncclInt32, p, me.comm, nullptr));
    }
  }
  MP_NCCL(ncclGroupEnd());
  for (int p = 0; p < n; ++p)
    MP_CHECK(checkBuf(*recv[p], 0, recv[p]->count(), [&](size_t i) { return moveValue(ncclInt32, p * 100 + me.rank, i); },
                      "uneven all-pairs from rank " + std::to_string(p) + " at rank " + std::to_string(me.rank)));
  return 0;
}

TEST(MpP2p, AllPairsUnevenCountsAnyOrder) {
  RunResult res = runRanks(
      5, [](int rank, int nr, const ncclUniqueId& id) { return withComm(rank, nr, id, allPairsUneven); }, opts(120));
  EXPECT_RANKS_OK(res);
}

TEST(MpP2p, UngroupedEvenOddExchange) {
  RunResult res = runRanks(
      4,
      [](int rank, int nr, const ncclUniqueId& id) {
        return withComm(rank, nr, id, [](const Rank& me) {
          const size_t count = 100003;
          const int partner = me.rank ^ 1;
          HostBuf send(ncclFloat32, count), recv(ncclFloat32, count);
          send.fill([&](size_t i) { return moveValue(ncclFloat32, me.rank, i); });
          recv.fill(sentinelValue(ncclFloat32));
          if (me.rank % 2 == 0) {
            MP_NCCL(ncclSend(send.data(), count, ncclFloat32, partner, me.comm, nullptr));
            MP_NCCL(ncclRecv(recv.data(), count, ncclFloat32, partner, me.comm, nullptr));
          } else {
            MP_NCCL(ncclRecv(recv.data(), count, ncclFloat32, partner, me.comm, nullptr));
            MP_NCCL(ncclSend(send.data(), count, ncclFloat32, partner, me.comm, nullptr));
          }
          MP_CHECK(checkBuf(recv, 0, count, [&](size_t i) { return moveValue(ncclFloat32, partner, i); },
                            "ungrouped exchange"));
          return 0;
        });
      },
      opts(60));
  EXPECT_RANKS_OK(res);
}

// AllReduce, AllGather, Broadcast (root 1), ReduceScatter, Reduce (root 0)
// and a ring Send/Recv, all issued inside one group.
int mixedGroup(const Rank& me) {
  const int n = me.nranks, prev = (me.rank + n - 1) % n, next = (me.rank + 1) % n;
  const size_t c = 1031;
  RedCase sum{ncclFloat32, TestOp::kSum, n};
  RedCase imax{ncclInt32, TestOp::kMax, n};
  HostBuf arIn(ncclFloat32, c), arOut(ncclFloat32, c);
  HostBuf agIn(ncclInt32, c), agOut(ncclInt32, c * n);
  HostBuf bc(ncclFloat64, c);
  HostBuf rsIn(ncclInt32, c * n), rsOut(ncclInt32, c);
  HostBuf rdIn(ncclFloat32, c), rdOut(ncclFloat32, c);
  HostBuf srIn(ncclUint8, c), srOut(ncclUint8, c);
  arIn.fill([&](size_t i) { return redInput(sum, me.rank, i); });
  agIn.fill([&](size_t i) { return moveValue(ncclInt32, me.rank, i); });
  bc.fill([&](size_t i) { return me.rank == 1 ? moveValue(ncclFloat64, 1, i) : sentinelValue(ncclFloat64); });
  rsIn.fill([&](size_t i) { return redInput(imax, me.rank, i); });
  rdIn.fill([&](size_t i) { return redInput(sum, me.rank, i + 5); });
  srIn.fill([&](size_t i) { return moveValue(ncclUint8, me.rank, i); });
  for (HostBuf* b : {&arOut, &agOut, &rsOut, &rdOut, &srOut}) b->fill(sentinelValue(b->dtype()));

  MP_NCCL(ncclGroupStart());
  MP_NCCL(ncclAllReduce(arIn.data(), arOut.data(), c, ncclFloat32, ncclSum, me.comm, nullptr));
  MP_NCCL(ncclAllGather(agIn.data(), agOut.data(), c, ncclInt32, me.comm, nullptr));
  MP_NCCL(ncclBroadcast(bc.data(), bc.data(), c, ncclFloat64, 1 % n, me.comm, nullptr));
  MP_NCCL(ncclReduceScatter(rsIn.data(), rsOut.data(), c, ncclInt32, ncclMax, me.comm, nullptr));
  MP_NCCL(ncclReduce(rdIn.data(), rdOut.data(), c, ncclFloat32, ncclSum, 0, me.comm, nullptr));
  MP_NCCL(ncclSend(srIn.data(), c, ncclUint8, next, me.comm, nullptr));
  MP_NCCL(ncclRecv(srOut.data(), c, ncclUint8, prev, me.comm, nullptr));
  MP_NCCL(ncclGroupEnd());

  MP_CHECK(checkBuf(arOut, 0, c, [&](size_t i) { return redExpected(sum, i); }, "grouped AllReduce"));
  for (int p = 0; p < n; ++p)
    MP_CHECK(checkBuf(agOut, size_t(p) * c, c, [&](size_t i) { return moveValue(ncclInt32, p, i); }, "grouped AllGather"));
  MP_CHECK(checkBuf(bc, 0, c, [&](size_t i) { return moveValue(ncclFloat64, 1 % n, i); }, "grouped Broadcast"));
  MP_CHECK(checkBuf(rsOut, 0, c, [&](size_t i) { return redExpected(imax, size_t(me.rank) * c + i); },
                    "grouped ReduceScatter"));
  if (me.rank == 0)
    MP_CHECK(checkBuf(rdOut, 0, c, [&](size_t i) { return redExpected(sum, i + 5); }, "grouped Reduce"));
  MP_CHECK(checkBuf(srOut, 0, c, [&](size_t i) { return moveValue(ncclUint8, prev, i); }, "grouped Send/Recv"));
  return 0;
}

TEST(MpGroup, CollectivesAndP2pInOneGroup) {
  for (int n : {2, 4}) {
    RunResult res = runRanks(
        n, [](int rank, int nr, const ncclUniqueId& id) { return withComm(rank, nr, id, mixedGroup); }, opts(90));
    EXPECT_RANKS_OK(res) << "nranks " << n;
  }
}

TEST(MpGroup, ManyAllReducesInOneGroup) {
  RunResult res = runRanks(
      3,
      [](int rank, int nr, const ncclUniqueId& id) {
        return withComm(rank, nr, id, [](const Rank& me) {
          constexpr int kOps = 16;
          std::vector<std::unique_ptr<HostBuf>> in, out;
          for (int k = 0; k < kOps; ++k) {
            RedCase c{ncclInt64, TestOp::kSum, me.nranks};
            in.push_back(std::make_unique<HostBuf>(ncclInt64, 100 + k * 37));
            out.push_back(std::make_unique<HostBuf>(ncclInt64, 100 + k * 37));
            in[k]->fill([&](size_t i) { return redInput(c, me.rank, i + k); });
            out[k]->fill(sentinelValue(ncclInt64));
          }
          MP_NCCL(ncclGroupStart());
          for (int k = 0; k < kOps; ++k)
            MP_NCCL(ncclAllReduce(in[k]->data(), out[k]->data(), in[k]->count(), ncclInt64, ncclSum, me.comm, nullptr));
          MP_NCCL(ncclGroupEnd());
          for (int k = 0; k < kOps; ++k) {
            RedCase c{ncclInt64, TestOp::kSum, me.nranks};
            MP_CHECK(checkBuf(*out[k], 0, out[k]->count(), [&](size_t i) { return redExpected(c, i + k); },
                              "grouped AllReduce #" + std::to_string(k)));
          }
          return 0;
        });
      },
      opts(90));
  EXPECT_RANKS_OK(res);
}

// In place (sendbuff == recvbuff, as nccl-tests runs SendRecv): each rank
// sends its buffer to the next and receives the previous rank's into the
// same memory. The send is read from a copy taken before anything moves, so
// what arrives is the sender's data as it was (large enough to go by
// reference, where a peer would otherwise read memory being overwritten).
// Rounds after the first repeat the group (repeat_call.h: the copy is taken
// again into memory kept from the first round), small and large.
TEST(MpP2p, InPlaceRingIsExact) {
  RunResult res = runRanks(
      3,
      [](int rank, int nr, const ncclUniqueId& id) {
        return withComm(rank, nr, id, [](const Rank& me) {
          for (size_t count : {size_t{300001}, size_t{3}}) {
            const int next = (me.rank + 1) % me.nranks, prev = (me.rank + me.nranks - 1) % me.nranks;
            HostBuf buf(ncclInt32, count);
            for (int round = 0; round < 3; ++round) {
              buf.fill([&](size_t i) { return moveValue(ncclInt32, me.rank, i + round); });
              MP_NCCL(ncclGroupStart());
              MP_NCCL(ncclSend(buf.data(), count, ncclInt32, next, me.comm, nullptr));
              MP_NCCL(ncclRecv(buf.data(), count, ncclInt32, prev, me.comm, nullptr));
              MP_NCCL(ncclGroupEnd());
              MP_CHECK(checkBuf(buf, 0, count, [&](size_t i) { return moveValue(ncclInt32, prev, i + round); },
                                "in-place ring round " + std::to_string(round)));
            }
          }
          return 0;
        });
      },
      opts(120));
  EXPECT_RANKS_OK(res);
}

// A sender that destroys its communicator and exits before the receiver
// first touches the pair: its pieces wait in the shared segment it created,
// which must outlive it until the receiver has mapped it (shm stepClose).
TEST(MpP2p, SenderExitsBeforeTheReceiverArrives) {
  RunResult res = runRanks(
      2,
      [](int rank, int nr, const ncclUniqueId& id) {
        return withComm(rank, nr, id, [](const Rank& me) {
          const size_t count = 1000;
          HostBuf buf(ncclInt32, count);
          if (me.rank == 1) {
            buf.fill([&](size_t i) { return moveValue(ncclInt32, 1, i); });
            MP_NCCL(ncclSend(buf.data(), count, ncclInt32, 0, me.comm, nullptr));
            return 0;  // destroy the communicator and exit at once
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(700));
          MP_NCCL(ncclRecv(buf.data(), count, ncclInt32, 1, me.comm, nullptr));
          MP_CHECK(checkBuf(buf, 0, count, [&](size_t i) { return moveValue(ncclInt32, 1, i); },
                            "pieces of a sender that has exited"));
          return 0;
        });
      },
      opts(60));
  EXPECT_RANKS_OK(res);
}

// The other side of that: a receiver that never comes (a program error).
// The sender's destroy waits FERRY_CLOSE_TIMEOUT_MS for it, then closes,
// naming the shm pair in its WARN; neither rank fails.
TEST(MpP2p, ReceiverThatNeverComesCostsTheCloseTimeoutAndIsNamed) {
  const std::string& dir = testLogDir("p2p");
  RunOptions o = loggedOptions(dir, "neverrecv", "INIT", {{"FERRY_CLOSE_TIMEOUT_MS", "300"}}, 60);
  RunResult res = runRanks(
      2,
      [](int rank, int nr, const ncclUniqueId& id) {
        return withComm(rank, nr, id, [](const Rank& me) {
          if (me.rank == 1) {
            HostBuf buf(ncclInt32, 100);
            buf.fill([&](size_t i) { return moveValue(ncclInt32, 1, i); });
            MP_NCCL(ncclSend(buf.data(), 100, ncclInt32, 0, me.comm, nullptr));
          }
          return 0;
        });
      },
      o);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(dir, "neverrecv", "did not finish closing within FERRY_CLOSE_TIMEOUT_MS (shm "), 1);
}

}  // namespace
}  // namespace ferry::mp
