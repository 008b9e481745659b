// What the executor relies on from one connection, ported from the old
// socket transport's tests: order, sizes, counts, close and drain rules.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "core/config.h"
#include "core/wait.h"
#include "harness.h"

namespace ferry::nxtest {
namespace {

Status connectPair(ThreadComm& comm) {
  FERRY_TRY(comm.setupAndPrepare());
  auto st = runThreads(2, [&](int r) -> Status {
    FERRY_ASSIGN(comm.conns[r][1 - r], comm.tr[r]->connect(comm.ctx[r], 1 - r));
    return Status::ok();
  });
  FERRY_TRY(st[0]);
  return st[1];
}

void pairExchange(int count, size_t slotBytes) {
  ScopedEnv e("FERRY_NET_SLOT_BYTES", std::to_string(slotBytes));
  ThreadComm comm(2);
  ASSERT_TRUE(connectPair(comm).isOk());
  auto st = runThreads(2, [&](int r) {
    return exchange(*comm.conns[r][1 - r], r, 1 - r, count, slotBytes, 30000);
  });
  EXPECT_TRUE(st[0].isOk()) << st[0].message();
  EXPECT_TRUE(st[1].isOk()) << st[1].message();
}

TEST(NetPair, PiecesInOrderBothDirections) { pairExchange(60, 64 << 10); }
TEST(NetPair, LargePieces) { pairExchange(24, 8 << 20); }
TEST(NetPair, ManyPieces) { pairExchange(20000, 4096); }

// 8 MiB each way, cut into default-sized (512 KiB) slots and put back
// together on the other side.
TEST(NetPair, EightMiBThroughDefaultSlots) {
  const size_t total = 8 << 20;
  ThreadComm comm(2);
  ASSERT_TRUE(connectPair(comm).isOk());
  std::vector<std::vector<char>> got(2);
  auto st = runThreads(2, [&](int r) -> Status {
    Connection& c = *comm.conns[r][1 - r];
    std::vector<char> out(total);
    for (size_t i = 0; i < total; i++) out[i] = static_cast<char>((r * 7 + i * 3 + (i >> 12)) & 0xff);
    size_t sent = 0;
    Waiter w(nullptr, 20000, "8 MiB exchange");
    while (sent < total || got[r].size() < total || !c.sendsDrained()) {
      bool moved = false;
      SendSlot s;
      if (sent < total) FERRY_TRY(c.trySend(&s));
      if (s.data) {
        if (s.capacity != 512 * 1024) return internalError("slot of " + std::to_string(s.capacity));
        size_t n = std::min(s.capacity, total - sent);
        memcpy(s.data, out.data() + sent, n);
        FERRY_TRY(c.commitSend(n));
        sent += n;
        moved = true;
      }
      RecvPiece p;
      FERRY_TRY(c.tryRecv(&p));
      if (p.ready) {
        const char* d = static_cast<const char*>(p.data);
        got[r].insert(got[r].end(), d, d + p.size);
        FERRY_TRY(c.releaseRecv());
        moved = true;
      }
      FERRY_TRY(c.progress());
      if (moved) w.progressed();
      else FERRY_TRY(w.idle());
    }
    return Status::ok();
  });
  for (int r = 0; r < 2; r++) {
    ASSERT_TRUE(st[r].isOk()) << st[r].message();
    ASSERT_EQ(got[r].size(), total);
    int from = 1 - r;
    for (size_t i = 0; i < total; i++)
      ASSERT_EQ(got[r][i], static_cast<char>((from * 7 + i * 3 + (i >> 12)) & 0xff)) << "byte " << i;
  }
}

// A rank that destroys its connection while the peer still expects pieces:
// its close exchange waits for the peer (in a thread here), the peer gets
// what was sent, then a remote error naming the close; once the peer's end
// goes too, the exchange ends (the peer's comm closed) well before its deadline.
TEST(NetPair, PieceInFlightIsDeliveredThenPeerCloseIsARemoteError) {
  ThreadComm comm(2);
  ASSERT_TRUE(connectPair(comm).isOk());
  Connection& c0 = *comm.conns[0][1];
  Connection& c1 = *comm.conns[1][0];
  SendSlot slot;
  ASSERT_TRUE(c1.trySend(&slot).isOk());
  ASSERT_NE(slot.data, nullptr);
  memcpy(slot.data, "abc", 3);
  ASSERT_TRUE(c1.commitSend(3).isOk());
  // No wait for c1's send to complete: with FERRY_NET_RETRY_MS on it completes
  // only once rank 0 holds it; the leaver's close exchange sends it first anyway.
  int64_t t0 = nowMs();
  std::thread leaver([&] { comm.conns[1][0].reset(); });  // rank 1 is done and goes away
  RecvPiece p;
  ASSERT_TRUE(waitPiece(c0, &p, 5000).isOk());
  EXPECT_EQ(std::string(static_cast<const char*>(p.data), p.size), "abc");
  ASSERT_TRUE(c0.releaseRecv().isOk());
  Status s = waitPiece(c0, &p, 5000);
  EXPECT_EQ(s.code(), Code::kRemote) << s.message();
  EXPECT_EQ(s.message(), "rank 1 closed the connection (its communicator was destroyed) on Socket/0 rank 1 (host1)");
  EXPECT_EQ(c0.progress().code(), Code::kRemote);  // sticky
  EXPECT_FALSE(c0.sendsDrained());
  comm.conns[0][1].reset();
  leaver.join();
  EXPECT_LT(nowMs() - t0, 5000);
}

TEST(NetPair, PeerThatClosedAfterItsWorkIsOnlyAnErrorForRecv) {
  ThreadComm comm(2);
  ASSERT_TRUE(connectPair(comm).isOk());
  auto st = runThreads(2, [&](int r) { return exchange(*comm.conns[r][1 - r], r, 1 - r, 6, 4096, 5000); });
  ASSERT_TRUE(st[0].isOk() && st[1].isOk()) << st[0].message() << st[1].message();
  // Rank 0 is done and destroys its communicator (its close waits for rank 1).
  std::thread leaver([&] { comm.conns[0][1].reset(); });
  Connection& c1 = *comm.conns[1][0];
  // The close is surely seen by now; progress and sendsDrained stay fine.
  for (int i = 0; i < 200; i++) {
    ASSERT_TRUE(c1.progress().isOk()) << i;
    usleep(1000);
  }
  EXPECT_TRUE(c1.sendsDrained());
  RecvPiece p;
  Status s = waitPiece(c1, &p, 5000);
  EXPECT_EQ(s.code(), Code::kRemote) << s.message();
  EXPECT_EQ(s.message(), "rank 0 closed the connection (its communicator was destroyed) on Socket/0 rank 0 (host0)");
  comm.conns[1][0].reset();
  leaver.join();
}

// Both ends close together after their work: the close exchange completes
// every request (no WARN about requests in flight) and takes far less than
// its deadline.
TEST(NetPair, BothEndsCloseTogetherQuickly) {
  ThreadComm comm(2);
  ASSERT_TRUE(connectPair(comm).isOk());
  auto st = runThreads(2, [&](int r) { return exchange(*comm.conns[r][1 - r], r, 1 - r, 20, 8192, 5000); });
  ASSERT_TRUE(st[0].isOk() && st[1].isOk()) << st[0].message() << st[1].message();
  int64_t t0 = nowMs();
  runThreads(2, [&](int r) {
    comm.conns[r][1 - r].reset();
    return Status::ok();
  });
  EXPECT_LT(nowMs() - t0, 2000);
}

// Stage `count` full slots (waiting for free ones). A Socket receiver moves
// nothing until it calls the connection, so beyond what the kernel buffers
// these stay queued here.
void stageSlots(Connection& c, size_t slot, char first, int count) {
  for (int k = 0; k < count; k++) {
    SendSlot s;
    Waiter w(nullptr, 10000, "stage");
    while (!s.data) {
      ASSERT_TRUE(c.trySend(&s).isOk());
      if (!s.data) {
        ASSERT_TRUE(w.idle().isOk());
      }
    }
    memset(s.data, first + k, slot);
    ASSERT_TRUE(c.commitSend(slot).isOk());
  }
}

Status readPieces(Connection& c, size_t slot, char first, int count, int64_t delayMs) {
  usleep(delayMs * 1000);
  Waiter w(nullptr, 20000, "reader");
  for (int k = 0; k < count;) {
    RecvPiece p;
    FERRY_TRY(c.tryRecv(&p));
    if (!p.ready) {
      FERRY_TRY(w.idle());
      continue;
    }
    w.progressed();
    const char* d = static_cast<const char*>(p.data);
    if (p.size != slot || d[0] != first + k || d[slot / 2] != first + k || d[slot - 1] != first + k)
      return internalError("piece " + std::to_string(k) + " wrong (" + std::to_string(p.size) + " bytes)");
    FERRY_TRY(c.releaseRecv());
    k++;
  }
  return Status::ok();
}

TEST(NetPair, DestructorFlushesStagedPieces) {
  const size_t slot = 8 << 20;
  ScopedEnv e("FERRY_NET_SLOT_BYTES", std::to_string(slot));
  ThreadComm comm(2);
  ASSERT_TRUE(connectPair(comm).isOk());
  Connection& c0 = *comm.conns[0][1];
  stageSlots(c0, slot, 'a', 4);  // 32 MiB: far more than the kernel takes
  EXPECT_FALSE(c0.sendsDrained());
  Status rs;
  // The reader takes the pieces, then closes its end (the close exchange
  // needs both ends).
  std::thread reader([&] {
    rs = readPieces(*comm.conns[1][0], slot, 'a', 4, 100);
    comm.conns[1][0].reset();
  });
  int64_t t0 = nowMs();
  comm.conns[0][1].reset();  // the reader starts while we are in the destructor
  int64_t closeMs = nowMs() - t0;
  reader.join();
  EXPECT_TRUE(rs.isOk()) << rs.message();
  EXPECT_GE(closeMs, 90);  // it did wait for the reader
  EXPECT_LT(closeMs, 10000);  // and not for its deadline
}

// The contract the executor relies on: once sendsDrained() is true we may
// destroy our side and the peer still gets everything (the destructor's
// close exchange ends when the peer, done reading, closes its end too).
TEST(NetPair, OnceDrainedThePeerNeedsNothingMoreFromUs) {
  const size_t slot = 4 << 20;
  ScopedEnv e("FERRY_NET_SLOT_BYTES", std::to_string(slot));
  ThreadComm comm(2);
  ASSERT_TRUE(connectPair(comm).isOk());
  Connection& c0 = *comm.conns[0][1];
  Status rs;
  std::thread reader([&] {
    rs = readPieces(*comm.conns[1][0], slot, 'k', 6, 50);
    comm.conns[1][0].reset();
  });
  stageSlots(c0, slot, 'k', 6);
  Waiter w(nullptr, 10000, "sender");
  while (!c0.sendsDrained()) ASSERT_TRUE(w.idle().isOk());
  // From here on rank 0 never touches its side: connection and network go.
  comm.conns[0][1].reset();
  comm.tr[0].reset();
  reader.join();
  EXPECT_TRUE(rs.isOk()) << rs.message();
}

TEST(NetPair, BothSidesClosingWithStagedPiecesDoNotWaitForEachOther) {
  const size_t slot = 8 << 20;
  ScopedEnv e("FERRY_NET_SLOT_BYTES", std::to_string(slot));
  ScopedEnv t("FERRY_TIMEOUT_MS", "20000");
  ThreadComm comm(2);
  ASSERT_TRUE(connectPair(comm).isOk());
  // Nobody reads: 32 MiB stays queued on each side.
  runThreads(2, [&](int r) -> Status {
    stageSlots(*comm.conns[r][1 - r], slot, 'a', 4);
    return Status::ok();
  });
  EXPECT_FALSE(comm.conns[0][1]->sendsDrained());
  EXPECT_FALSE(comm.conns[1][0]->sendsDrained());
  int64_t t0 = nowMs();
  runThreads(2, [&](int r) {
    comm.conns[r][1 - r].reset();
    return Status::ok();
  });
  EXPECT_LT(nowMs() - t0, 5000);
}

}  // namespace
}  // namespace ferry::nxtest
