// The Acceptor on its own, with short limits: header deadlines while the
// owner pumps, no deadline running while it does not, source bounds, and
// body sizes decided before reading. Real sockets on 127.0.0.1.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>

#include "bootstrap/acceptor.h"
#include "bootstrap/wire.h"
#include "core/wait.h"
#include "tests/unit/bootstrap/flood_util.h"

namespace ferry::bootstrap {
namespace {

constexpr uint64_t kSecret = 0x1234567890abcdefULL;

// Type kP2p: a P2pHeader head; the body is its size, refused above 1000.
class TestProtocol final : public Protocol {
 public:
  size_t headBytes(uint32_t type) const override { return type == kP2p ? sizeof(P2pHeader) : 0; }
  BodyPlan body(uint32_t, const uint8_t* head) override {
    P2pHeader p;
    std::memcpy(&p, head, sizeof(p));
    if (p.size > 1000) return BodyPlan::refuse("too big");
    return BodyPlan::read(p.size);
  }
};

Socket listenLocal() { return listenSocket(test::loopback(0)).take(); }

Socket sendMessage(const SockAddr& to, uint64_t secret, uint64_t size, size_t bodyBytes) {
  Socket s = connectSocket(to, Until::after(5000)).take();
  std::vector<uint8_t> msg(sizeof(ConnHeader) + sizeof(P2pHeader) + bodyBytes, 0x5a);
  ConnHeader h{secret, kP2p};
  P2pHeader p{0, 1, size};
  std::memcpy(msg.data(), &h, sizeof(h));
  std::memcpy(msg.data() + sizeof(h), &p, sizeof(p));
  EXPECT_TRUE(sendAll(s, msg.data(), msg.size(), Until::after(5000)).isOk());
  return s;
}

// Pump for `ms`; returns what completed.
std::vector<Incoming> pump(Acceptor& a, const Socket& l, TestProtocol& proto, int64_t ms) {
  std::vector<Incoming> done;
  for (int64_t end = nowMs() + ms; nowMs() < end;) {
    EXPECT_TRUE(a.step(l, proto, 10, nullptr, &done).isOk());
  }
  return done;
}

TEST(Acceptor, IdleConnectionsAreDroppedAtTheirHeaderDeadline) {
  Socket l = listenLocal();
  AcceptorLimits lim;
  lim.headerMs = 200;
  Acceptor a("test", kSecret, lim);
  TestProtocol proto;
  auto idle = test::idleConnections(l.peer(), 20);
  pump(a, l, proto, 100);
  EXPECT_EQ(a.pending(), 20u);
  pump(a, l, proto, 400);
  EXPECT_EQ(a.pending(), 0u);
  EXPECT_EQ(a.refusals(), 20u);
}

TEST(Acceptor, TimeBetweenStepsDoesNotCount) {
  Socket l = listenLocal();
  AcceptorLimits lim;
  lim.headerMs = 200;
  lim.bodyMs = 200;
  Acceptor a("test", kSecret, lim);
  TestProtocol proto;
  // A header that arrives while nobody pumps, then its body 500 ms later.
  Socket s = sendMessage(l.peer(), kSecret, 10, 5);
  auto done = pump(a, l, proto, 50);
  EXPECT_TRUE(done.empty());
  usleep(500 * 1000);  // the owner is busy elsewhere
  uint8_t rest[5] = {1, 2, 3, 4, 5};
  ASSERT_TRUE(sendAll(s, rest, sizeof(rest), Until::after(1000)).isOk());
  done = pump(a, l, proto, 100);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].body.size(), 10u);
  EXPECT_EQ(done[0].body[9], 5);
}

TEST(Acceptor, SourceBoundDropsTheOldestSilentConnection) {
  Socket l = listenLocal();
  AcceptorLimits lim;
  lim.perSource = 8;
  Acceptor a("test", kSecret, lim);
  TestProtocol proto;
  auto idle = test::idleConnections(l.peer(), 30);
  pump(a, l, proto, 100);
  EXPECT_EQ(a.pending(), 8u);
  Socket good = sendMessage(l.peer(), kSecret, 3, 3);
  auto done = pump(a, l, proto, 100);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].body.size(), 3u);
}

TEST(Acceptor, BodySizeIsDecidedBeforeReading) {
  Socket l = listenLocal();
  Acceptor a("test", kSecret);
  TestProtocol proto;
  Socket big = sendMessage(l.peer(), kSecret, uint64_t(1) << 40, 0);
  Socket wrong = sendMessage(l.peer(), kSecret ^ 1, 3, 3);
  auto done = pump(a, l, proto, 200);
  EXPECT_TRUE(done.empty());
  EXPECT_EQ(a.pending(), 0u);
  EXPECT_EQ(a.refusals(), 2u);
}

}  // namespace
}  // namespace ferry::bootstrap
