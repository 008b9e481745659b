// Strangers at the bootstrap listeners (the root's and each rank's): idle
// connections and garbage must not delay creation or messages, and refusals
// are logged rate-limited. Real sockets on 127.0.0.1.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "core/log.h"
#include "core/wait.h"
#include "tests/support/test_util.h"
#include "tests/unit/bootstrap/flood_util.h"

namespace ferry {
namespace {

constexpr int kIdle = 500;

std::string tempLog(const char* name) {
  return "/tmp/ferry_" + std::string(name) + "_" + std::to_string(getpid()) + ".log";
}

TEST(BootstrapFlood, StrangersAtRankListenerDoNotDelayMessagesAndWarnsAreRateLimited) {
  test::ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  std::string logPath = tempLog("flood_p2p");
  test::ScopedEnv dbg("NCCL_DEBUG", "WARN");
  test::ScopedEnv file("NCCL_DEBUG_FILE", logPath);
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  std::vector<std::unique_ptr<Bootstrap>> bs(2);
  auto st = test::runThreads(2, [&](int rank) -> Status {
    FERRY_ASSIGN(bs[rank], Bootstrap::create(id, rank, 2, nullptr, 60000));
    return Status::ok();
  });
  ASSERT_TRUE(st[0].isOk() && st[1].isOk()) << st[0].message() << st[1].message();
  SockAddr target = bs[1]->peerAddrs()[1];
  std::vector<Socket> idle = test::idleConnections(target, kIdle);
  // 500 strangers that present a wrong secret.
  std::vector<Socket> wrong = test::idleConnections(target, kIdle);
  for (auto& s : wrong) {
    bootstrap::ConnHeader h{bs[1]->secret() ^ 0xfeed, bootstrap::kP2p};
    ASSERT_TRUE(sendAll(s, &h, sizeof(h), Until::after(5000)).isOk());
  }
  int64_t t0 = nowMs();
  int v = 7, got = 0;
  ASSERT_TRUE(bs[0]->send(1, 3, &v, sizeof(v)).isOk());
  Status r = bs[1]->recv(0, 3, &got, sizeof(got));
  int64_t took = nowMs() - t0;
  EXPECT_TRUE(r.isOk()) << r.message();
  EXPECT_EQ(got, 7);
  EXPECT_LT(took, 10000);
  bs[1].reset();  // the final count
  int secretLines = test::countLines(logPath, "wrong secret");
  int lines = test::countLines(logPath, "NCCL WARN bootstrap: ");
  printf("recv behind %d idle + %d wrong-secret connections: %lld ms; %d WARN lines naming the "
         "wrong secret, %d bootstrap WARN lines\n",
         kIdle, kIdle, static_cast<long long>(took), secretLines, lines);
  EXPECT_GE(secretLines, 1);
  EXPECT_LE(secretLines, 15);
  EXPECT_LE(lines, 20);
  EXPECT_GE(test::countLines(logPath, " in all; last: "), 1) << "no summary with a count";
  unlink(logPath.c_str());
}

}  // namespace
}  // namespace ferry
