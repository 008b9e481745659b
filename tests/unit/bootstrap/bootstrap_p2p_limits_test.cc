// A peer that knows the secret announces point-to-point messages of absurd
// sizes: refused at once without allocating, and without holding up the
// message recv() waits for. Real sockets on 127.0.0.1.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "core/log.h"
#include "core/wait.h"
#include "tests/support/test_util.h"
#include "tests/unit/bootstrap/flood_util.h"

namespace ferry {
namespace {

using namespace bootstrap;

long maxRssMiB() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;
}

Socket forgeP2p(const SockAddr& to, uint64_t secret, int rank, int tag, uint64_t size) {
  Socket s = connectSocket(to, Until::after(5000)).take();
  uint8_t msg[sizeof(ConnHeader) + sizeof(P2pHeader)];
  ConnHeader h{secret, kP2p};
  P2pHeader p{rank, tag, size};
  std::memcpy(msg, &h, sizeof(h));
  std::memcpy(msg + sizeof(h), &p, sizeof(p));
  EXPECT_TRUE(sendAll(s, msg, sizeof(msg), Until::after(5000)).isOk());
  return s;
}

TEST(BootstrapP2pLimits, OversizedMessageAnnounceIsRefusedAtOnce) {
  test::ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  auto pair = test::bootstrapPair(60000);
  ASSERT_TRUE(pair.isOk()) << pair.status().message();
  std::vector<std::unique_ptr<Bootstrap>> bs = pair.take();
  SockAddr to = bs[1]->peerAddrs()[1];
  uint64_t secret = bs[1]->secret();
  long rss0 = maxRssMiB();

  // 4 GiB announced for a message nobody waits for, and for the one recv waits for.
  Socket huge = forgeP2p(to, secret, 0, 99, uint64_t(4) << 30);
  Socket huge2 = forgeP2p(to, secret, 0, 5, uint64_t(4) << 30);
  // A message of a legal size that never completes must not hold anything up.
  Socket slow = forgeP2p(to, secret, 0, 6, 100);
  std::thread sender([&] {
    usleep(200 * 1000);
    int v = 11;
    EXPECT_TRUE(bs[0]->send(1, 5, &v, sizeof(v)).isOk());
  });
  int64_t t0 = nowMs();
  int got = 0;
  Status r = bs[1]->recv(0, 5, &got, sizeof(got));
  int64_t took = nowMs() - t0;
  sender.join();
  EXPECT_TRUE(r.isOk()) << r.message();
  EXPECT_EQ(got, 11);
  EXPECT_LT(took, 3000);
  EXPECT_TRUE(test::waitForWarn("announces 4294967296 bytes, more than the 67108864", 2000))
      << log::lastError();
  char c;  // the forger's connections were closed
  EXPECT_EQ(recvAll(huge, &c, 1, Until::after(2000)).code(), Code::kRemote);
  EXPECT_EQ(recvAll(huge2, &c, 1, Until::after(2000)).code(), Code::kRemote);

  // The awaited message announced with a legal but wrong size: recv fails at
  // once, naming both sizes, without reading (or allocating) the body.
  Socket wrong = forgeP2p(to, secret, 0, 7, 32 << 20);
  t0 = nowMs();
  r = bs[1]->recv(0, 7, &got, sizeof(got));
  EXPECT_EQ(r.code(), Code::kInternal) << r.message();
  EXPECT_NE(r.message().find("has 33554432 bytes, expected 4"), std::string::npos) << r.message();
  EXPECT_LT(nowMs() - t0, 3000);
  long grew = maxRssMiB() - rss0;
  printf("oversized announces refused in %lld ms; peak RSS grew by %ld MiB\n",
         static_cast<long long>(took), grew);
  EXPECT_LT(grew, 24);

  // Sizes above the protocol's bound are refused on the sending side too.
  EXPECT_EQ(bs[0]->send(1, 8, nullptr, kMaxP2pBytes + 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(bs[1]->recv(0, 8, nullptr, kMaxP2pBytes + 1).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace ferry
