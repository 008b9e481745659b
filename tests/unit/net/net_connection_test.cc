// NetConnection over the in-process fake network: ordering, exact bytes,
// "not now" retries, errors and closing (the close exchange: no comm may be
// closed with a request in flight).
#include "transports/net/net_connection.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <memory>

#include "core/config.h"
#include "core/wait.h"
#include "fake_net.h"

namespace ferry::net {
namespace {

// Both ends run their close exchange in this one thread; then the end that
// finished first is destroyed first (a failed end finishes at once, and its
// close makes the other end's requests fail).
void closeBoth(std::unique_ptr<NetConnection>& a, std::unique_ptr<NetConnection>& b) {
  bool overA = !a, overB = !b, ok = false, moved = false;
  for (int i = 0; i < 100000 && !(overA && overB); ++i) {
    if (!overA) overA = a->closeStep(&moved, &ok);
    if (!overB) overB = b->closeStep(&moved, &ok);
  }
  if (overA) {
    a.reset();
    b.reset();
  } else {
    b.reset();
    a.reset();
  }
}

// Two ends that close together when the test's scope ends.
struct Pair {
  std::unique_ptr<NetConnection> a, b;
  Pair(std::unique_ptr<NetConnection> x, std::unique_ptr<NetConnection> y)
      : a(std::move(x)), b(std::move(y)) {}
  Pair(Pair&&) = default;
  ~Pair() { closeBoth(a, b); }
};

// Two connected ends a <-> b, each with K slots of slotBytes.
Pair makePair(int slots, size_t slotBytes) {
  const ncclNet_v11_t* n = fakenet::net();
  char ha[NCCL_NET_HANDLE_MAXSIZE] = {}, hb[NCCL_NET_HANDLE_MAXSIZE] = {};
  void *la, *lb, *aSend = nullptr, *aRecv = nullptr, *bSend = nullptr, *bRecv = nullptr;
  EXPECT_EQ(n->listen(nullptr, 0, ha, &la), ncclSuccess);
  EXPECT_EQ(n->listen(nullptr, 0, hb, &lb), ncclSuccess);
  for (int i = 0; i < 100 && !(aSend && aRecv && bSend && bRecv); ++i) {
    if (!aSend) n->connect(nullptr, 0, hb, &aSend, nullptr);
    if (!bSend) n->connect(nullptr, 0, ha, &bSend, nullptr);
    if (!aRecv) n->accept(la, &aRecv, nullptr);
    if (!bRecv) n->accept(lb, &bRecv, nullptr);
  }
  n->closeListen(la);
  n->closeListen(lb);
  auto a = std::make_unique<NetConnection>(n, aSend, aRecv, 1, slots, slotBytes, "fake a->b");
  auto b = std::make_unique<NetConnection>(n, bSend, bRecv, 0, slots, slotBytes, "fake b->a");
  EXPECT_TRUE(a->init().isOk());
  EXPECT_TRUE(b->init().isOk());
  return {std::move(a), std::move(b)};
}

bool sendPiece(NetConnection& c, uint8_t seed, size_t bytes) {
  SendSlot slot;
  if (!c.trySend(&slot).isOk() || !slot.data) return false;
  for (size_t i = 0; i < bytes; ++i) static_cast<uint8_t*>(slot.data)[i] = uint8_t(seed + i * 7);
  return c.commitSend(bytes).isOk();
}

// Receives one piece if there is one; checks its bytes exactly.
bool recvPiece(NetConnection& c, uint8_t seed, size_t bytes) {
  RecvPiece p;
  EXPECT_TRUE(c.tryRecv(&p).isOk());
  if (!p.ready) return false;
  EXPECT_EQ(p.size, bytes);
  const auto* d = static_cast<const uint8_t*>(p.data);
  for (size_t i = 0; i < bytes; ++i)
    if (d[i] != uint8_t(seed + i * 7)) {
      ADD_FAILURE() << "byte " << i << " of piece seed " << int(seed);
      break;
    }
  EXPECT_TRUE(c.releaseRecv().isOk());
  return true;
}

class NetConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fakenet::knobs() = {};
    fakenet::resetInflightCloses();
    // A close exchange that cannot finish gives up after this long.
    setenv("FERRY_TIMEOUT_MS", "2000", 1);
    config::reload();
  }
  void TearDown() override {
    fakenet::knobs() = {};
    EXPECT_EQ(fakenet::openComms(), 0);
    if (cleanClose_) {
      EXPECT_EQ(fakenet::inflightCloses(), 0) << "a comm was closed with requests in flight";
    }
    unsetenv("FERRY_TIMEOUT_MS");
    config::reload();
  }
  bool cleanClose_ = true;  // failure tests close with requests in flight on purpose
};

TEST_F(NetConnectionTest, PiecesArriveInOrderBothWays) {
  auto [a, b] = makePair(3, 4096);
  int sentA = 0, sentB = 0, gotA = 0, gotB = 0;
  const int kPieces = 200;
  for (int iter = 0; iter < 100000 && (gotA < kPieces || gotB < kPieces); ++iter) {
    size_t szA = (sentA * 37) % 4097, szB = (sentB * 53) % 4097;
    if (sentA < kPieces && sendPiece(*a, uint8_t(sentA), szA)) sentA++;
    if (sentB < kPieces && sendPiece(*b, uint8_t(sentB + 100), szB)) sentB++;
    if (gotA < sentB && recvPiece(*a, uint8_t(gotA + 100), (gotA * 53) % 4097)) gotA++;
    if (gotB < sentA && recvPiece(*b, uint8_t(gotB), (gotB * 37) % 4097)) gotB++;
    ASSERT_TRUE(a->progress().isOk());
    ASSERT_TRUE(b->progress().isOk());
  }
  EXPECT_EQ(gotA, kPieces);
  EXPECT_EQ(gotB, kPieces);
  EXPECT_TRUE(a->sendsDrained());
  EXPECT_TRUE(b->sendsDrained());
}

TEST_F(NetConnectionTest, SlotsLimitPiecesInFlight) {
  auto [a, b] = makePair(2, 64);
  EXPECT_TRUE(sendPiece(*a, 1, 64));
  EXPECT_TRUE(sendPiece(*a, 2, 64));
  // b has two receives posted: both pieces land, the sender's slots free up.
  EXPECT_TRUE(sendPiece(*a, 3, 64));
  EXPECT_TRUE(sendPiece(*a, 4, 64));
  // Now b's receive slots are full and a's two staging slots are in flight.
  EXPECT_FALSE(sendPiece(*a, 5, 64));
  EXPECT_FALSE(a->sendsDrained());
  EXPECT_TRUE(recvPiece(*b, 1, 64));
  EXPECT_TRUE(sendPiece(*a, 5, 64));
  for (uint8_t s = 2; s <= 5; ++s) EXPECT_TRUE(recvPiece(*b, s, 64));
  EXPECT_TRUE(a->sendsDrained());
}

TEST_F(NetConnectionTest, NullRequestsAreRetried) {
  fakenet::knobs().nullIrecvs = 5;  // b's first receives are refused
  auto [a, b] = makePair(2, 128);
  fakenet::knobs().nullIsends = 7;
  int sent = 0, got = 0;
  for (int i = 0; i < 1000 && got < 10; ++i) {
    if (sent < 10 && sendPiece(*a, uint8_t(sent), 100)) sent++;
    if (got < sent && recvPiece(*b, uint8_t(got), 100)) got++;
    ASSERT_TRUE(a->progress().isOk());
    ASSERT_TRUE(b->progress().isOk());
  }
  EXPECT_EQ(got, 10);
  EXPECT_EQ(fakenet::knobs().nullIsends, 0);
  EXPECT_EQ(fakenet::knobs().nullIrecvs, 0);
}

TEST_F(NetConnectionTest, PluginErrorIsLatchedAndNamesThePeer) {
  cleanClose_ = false;
  auto [a, b] = makePair(2, 128);
  EXPECT_TRUE(sendPiece(*a, 1, 10));
  fakenet::knobs().failTests = true;
  RecvPiece p;
  Status st = b->tryRecv(&p);
  EXPECT_EQ(st.code(), Code::kRemote);
  EXPECT_NE(st.message().find("fake b->a"), std::string::npos) << st.message();
  fakenet::knobs().failTests = false;
  EXPECT_EQ(b->tryRecv(&p).code(), Code::kRemote);  // stays failed
  EXPECT_EQ(b->progress().code(), Code::kRemote);
  EXPECT_FALSE(b->sendsDrained());
}

TEST_F(NetConnectionTest, MarkFailedMakesThePeerFail) {
  cleanClose_ = false;
  auto [a, b] = makePair(2, 128);
  a->markFailed();
  RecvPiece p;
  EXPECT_EQ(b->tryRecv(&p).code(), Code::kRemote);
  SendSlot slot;
  EXPECT_EQ(a->trySend(&slot).code(), Code::kRemote);
}

TEST_F(NetConnectionTest, CloseDeliversQueuedPieces) {
  auto [a, b] = makePair(4, 256);
  fakenet::knobs().nullIsends = 50;  // the pieces are still queued when a closes
  for (uint8_t s = 0; s < 4; ++s) ASSERT_TRUE(sendPiece(*a, s, 200));
  EXPECT_FALSE(a->sendsDrained());
  bool over = false, ok = false, moved = false;
  int got = 0;
  for (int i = 0; i < 10000 && got < 4; ++i) {
    if (!over) over = a->closeStep(&moved, &ok);
    if (recvPiece(*b, uint8_t(got), 200)) got++;
  }
  EXPECT_EQ(got, 4);
  EXPECT_FALSE(over) << "a's exchange cannot finish before b takes part";
}

TEST_F(NetConnectionTest, CloseExchangeCompletesEveryRequest) {
  auto [a, b] = makePair(4, 256);
  for (uint8_t s = 0; s < 6; ++s) {
    ASSERT_TRUE(sendPiece(*a, s, 100));
    while (!recvPiece(*b, s, 100)) ASSERT_TRUE(a->progress().isOk());
  }
  bool overA = false, overB = false, okA = false, okB = false, moved = false;
  for (int i = 0; i < 10000 && !(overA && overB); ++i) {
    if (!overA) overA = a->closeStep(&moved, &okA);
    if (!overB) overB = b->closeStep(&moved, &okB);
  }
  EXPECT_TRUE(overA && okA);
  EXPECT_TRUE(overB && okB);
  EXPECT_EQ(a->requestsInFlight(), 0);
  EXPECT_EQ(b->requestsInFlight(), 0);
}

TEST_F(NetConnectionTest, CloseDropsPiecesNobodyReceived) {
  auto [a, b] = makePair(3, 256);
  ASSERT_TRUE(sendPiece(*a, 1, 24));  // the close header's size
  ASSERT_TRUE(sendPiece(*a, 2, 100));
  // b never consumes them; the exchange drops them and still ends clean.
}

TEST_F(NetConnectionTest, CloseRetriesNullRequests) {
  auto [a, b] = makePair(2, 128);
  fakenet::knobs().nullIsends = 9;
  fakenet::knobs().nullIrecvs = 9;
}

TEST_F(NetConnectionTest, CloseWithASilentPeerIsBounded) {
  cleanClose_ = false;
  auto [a, b] = makePair(2, 128);
  int64_t t0 = nowMs();
  a.reset();  // b never runs its exchange: a gives up after FERRY_TIMEOUT_MS (2 s)
  int64_t ms = nowMs() - t0;
  EXPECT_GE(ms, 1800);
  EXPECT_LE(ms, 10000);
  EXPECT_EQ(fakenet::inflightCloses(), 1);
}

TEST_F(NetConnectionTest, OversizePieceIsRejected) {
  auto [a, b] = makePair(2, 128);
  SendSlot slot;
  ASSERT_TRUE(a->trySend(&slot).isOk());
  EXPECT_EQ(a->commitSend(129).code(), Code::kInternal);
}

}  // namespace
}  // namespace ferry::net
