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

TEST(BootstrapFlood, IdleConnectionsAndGarbageDoNotDelayCreation) {
  test::ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  test::ScopedEnv comm("NCCL_COMM_ID", std::nullopt);
  std::string logPath = tempLog("flood_create");
  test::ScopedEnv dbg("NCCL_DEBUG", "WARN");
  test::ScopedEnv file("NCCL_DEBUG_FILE", logPath);
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  SockAddr root = bootstrap::decodeId(id).root;
  std::set<int> before = test::ownLoopbackListeners();
  ASSERT_TRUE(before.count(root.port())) << "cannot see our listeners in /proc";

  std::vector<Socket> idle = test::idleConnections(root, kIdle);
  ASSERT_EQ(idle.size(), size_t(kIdle));
  test::GarbageFlood flood;
  flood.addTarget(root);
  flood.start();

  const int n = 4;
  std::atomic<int64_t> t0{0};
  std::vector<int64_t> took(n, -1);
  auto st = test::runThreads(n, [&](int rank) -> Status {
    if (rank == 0) {
      // Wait for the other ranks' listeners, fill each with idle connections
      // and garbage, then complete the rendezvous.
      std::set<int> ranks;
      for (int64_t end = nowMs() + 10000; nowMs() < end && ranks.size() < n - 1; usleep(2000)) {
        ranks.clear();
        for (int p : test::ownLoopbackListeners())
          if (!before.count(p)) ranks.insert(p);
      }
      if (ranks.size() < n - 1) return internalError("rank listeners not found");
      for (int p : ranks) {
        auto more = test::idleConnections(test::loopback(p), kIdle);
        if (more.size() != size_t(kIdle)) return internalError("idle connections failed");
        for (auto& s : more) idle.push_back(std::move(s));  // only rank 0 touches idle now
        flood.addTarget(test::loopback(p));
      }
      t0 = nowMs();
    }
    FERRY_ASSIGN(auto b, Bootstrap::create(id, rank, n, nullptr, 60000));
    took[rank] = nowMs() - t0.load();
    return test::exerciseBootstrap(*b);
  });
  flood.stop();
  for (int r = 0; r < n; r++) EXPECT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].message();
  int64_t worst = *std::max_element(took.begin(), took.end());
  int lines = test::countLines(logPath, "NCCL WARN bootstrap: ");
  printf("creation with %zu idle connections (%d per listener) and %llu garbage connections: "
         "%lld ms; %d bootstrap WARN lines\n",
         idle.size(), kIdle, static_cast<unsigned long long>(flood.sent()),
         static_cast<long long>(worst), lines);
  EXPECT_LT(worst, 10000);
  EXPECT_GE(flood.sent(), 100u);
  // Rate-limited: per listener the first refusal, about one summary a second
  // and a final count, not one line per stranger.
  EXPECT_LT(lines, 80);
  unlink(logPath.c_str());
}

TEST(BootstrapFlood, StrangersAtRankListenerDoNotDelayMessagesAndWarnsAreRateLimited) {
  test::ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  std::string logPath = tempLog("flood_p2p");
  test::ScopedEnv dbg("NCCL_DEBUG", "WARN");
  test::ScopedEnv file("NCCL_DEBUG_FILE", logPath);
  auto pair = test::bootstrapPair(60000);
  ASSERT_TRUE(pair.isOk()) << pair.status().message();
  std::vector<std::unique_ptr<Bootstrap>> bs = pair.take();
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
