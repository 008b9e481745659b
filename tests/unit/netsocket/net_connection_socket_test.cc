// The net transport's NetConnection (transports/net) over the real Socket
// network: pieces of every size up to the slot flow both ways, exact and in
// order, with helper threads and with caller-driven progress.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "test_net.h"
#include "transports/net/net_connection.h"

namespace ferry::nettest {
namespace {

constexpr size_t kSlotBytes = 256 * 1024;  // above the inline threshold: streamed pieces too

size_t pieceSize(int i) { return (size_t(i) * 104729) % (kSlotBytes + 1); }
uint8_t byteAt(int piece, size_t i) { return uint8_t(piece * 31 + i * 7 + (i >> 9)); }

class NetConnectionOverSocket : public ::testing::TestWithParam<int> {};

TEST_P(NetConnectionOverSocket, PiecesBothWaysExactAndInOrder) {
  Env ifname("NCCL_SOCKET_IFNAME", "lo");
  Env family("NCCL_SOCKET_FAMILY", "AF_INET");
  Env nthreads("NCCL_SOCKET_NTHREADS", std::to_string(GetParam()));
  Env nsocks("NCCL_NSOCKS_PERTHREAD", "2");
  // Pair ab: a sends to b; pair ba: b sends to a. The connections own the comms.
  auto ab = std::make_unique<Pair>();
  auto ba = std::make_unique<Pair>();
  ASSERT_EQ(connectPair(*ab), "");
  ASSERT_EQ(connectPair(*ba), "");
  net::NetConnection a(net(), ab->send, ba->recv, 1, 4, kSlotBytes, "socket a->b");
  net::NetConnection b(net(), ba->send, ab->recv, 0, 4, kSlotBytes, "socket b->a");
  ab->send = ab->recv = ba->send = ba->recv = nullptr;
  ASSERT_TRUE(a.init().isOk());
  ASSERT_TRUE(b.init().isOk());
  net::NetConnection* ends[2] = {&a, &b};
  const int kPieces = 120;
  int sent[2] = {0, 0}, got[2] = {0, 0};
  int64_t deadline = nowMs() + 60000;
  while ((got[0] < kPieces || got[1] < kPieces) && nowMs() < deadline) {
    for (int e = 0; e < 2; ++e) {
      net::NetConnection& c = *ends[e];
      ASSERT_TRUE(c.progress().isOk());
      SendSlot slot;
      if (sent[e] < kPieces && c.trySend(&slot).isOk() && slot.data) {
        size_t n = pieceSize(sent[e] + e * 1000);
        ASSERT_GE(slot.capacity, n);
        for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(slot.data)[i] = byteAt(sent[e] + e * 1000, i);
        ASSERT_TRUE(c.commitSend(n).isOk());
        sent[e]++;
      }
      RecvPiece p;
      ASSERT_TRUE(c.tryRecv(&p).isOk());
      if (p.ready) {
        int id = got[e] + (1 - e) * 1000;  // pieces from the other end
        ASSERT_EQ(p.size, pieceSize(id)) << "piece " << got[e] << " at end " << e;
        const auto* d = static_cast<const uint8_t*>(p.data);
        for (size_t i = 0; i < p.size; ++i) ASSERT_EQ(d[i], byteAt(id, i)) << "byte " << i;
        ASSERT_TRUE(c.releaseRecv().isOk());
        got[e]++;
      }
    }
  }
  EXPECT_EQ(got[0], kPieces);
  EXPECT_EQ(got[1], kPieces);
  while ((!a.sendsDrained() || !b.sendsDrained()) && nowMs() < deadline) {
    ASSERT_TRUE(a.progress().isOk());
    ASSERT_TRUE(b.progress().isOk());
  }
  EXPECT_TRUE(a.sendsDrained());
  EXPECT_TRUE(b.sendsDrained());
  // Both ends' close exchange, stepped here (a destructor would wait for the
  // other end): it completes every request before the comms are closed.
  bool over[2] = {false, false}, ok[2] = {false, false};
  while (!(over[0] && over[1]) && nowMs() < deadline) {
    bool moved = false;
    for (int e = 0; e < 2; ++e)
      if (!over[e]) over[e] = ends[e]->closeStep(&moved, &ok[e]);
  }
  EXPECT_TRUE(ok[0] && ok[1]);
  EXPECT_EQ(a.requestsInFlight(), 0);
  EXPECT_EQ(b.requestsInFlight(), 0);
}

INSTANTIATE_TEST_SUITE_P(Threads, NetConnectionOverSocket, ::testing::Values(0, 2));

}  // namespace
}  // namespace ferry::nettest
