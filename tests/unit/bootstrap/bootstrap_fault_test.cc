// Bootstrap under faults: intruders, missing ranks, inconsistent check-ins.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "core/log.h"
#include "core/wait.h"
#include "tests/support/test_util.h"

namespace ferry {
namespace {

SockAddr localAddrOf(const Socket& s) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len);
  return SockAddr::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}

// Connect to `to` and present `secret` as a check-in would.
Socket intrude(const SockAddr& to, uint64_t secret) {
  Socket s = connectSocket(to, Until::after(5000)).take();
  bootstrap::ConnHeader h{secret, bootstrap::kCheckIn};
  EXPECT_TRUE(sendAll(s, &h, sizeof(h), Until::after(5000)).isOk());
  return s;
}

TEST(BootstrapFaults, WrongSecretAtRootIsRefusedAndRendezvousSucceeds) {
  test::ScopedEnv e("NCCL_COMM_ID", std::nullopt);
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  auto idc = bootstrap::decodeId(id);
  // A silent connection first: it must not block the root.
  Socket silent = connectSocket(idc.root, Until::after(5000)).take();
  Socket bad = intrude(idc.root, idc.secret ^ 1);
  std::string who = localAddrOf(bad).toString();
  ASSERT_TRUE(test::waitForWarn("bootstrap: refused connection from " + who + ": wrong secret",
                                5000))
      << log::lastError();
  // The root closed the intruder's connection.
  char c;
  EXPECT_EQ(recvAll(bad, &c, 1, Until::after(2000)).code(), Code::kRemote);

  const int n = 3;
  auto st = test::runThreads(n, [&](int rank) -> Status {
    FERRY_ASSIGN(auto b, Bootstrap::create(id, rank, n, nullptr, 20000));
    return test::exerciseBootstrap(*b);
  });
  for (int r = 0; r < n; r++) EXPECT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].message();
}

TEST(BootstrapFaults, WrongSecretAtRankListenerIsRefused) {
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  std::vector<std::unique_ptr<Bootstrap>> bs(2);
  auto st = test::runThreads(2, [&](int rank) -> Status {
    FERRY_ASSIGN(bs[rank], Bootstrap::create(id, rank, 2, nullptr, 20000));
    return Status::ok();
  });
  ASSERT_TRUE(st[0].isOk() && st[1].isOk()) << st[0].message() << st[1].message();
  Socket bad = intrude(bs[1]->peerAddrs()[1], bs[1]->secret() + 1);
  std::string who = localAddrOf(bad).toString();
  int v = 42, got = 0;
  ASSERT_TRUE(bs[0]->send(1, 9, &v, sizeof(v)).isOk());
  ASSERT_TRUE(bs[1]->recv(0, 9, &got, sizeof(got)).isOk());
  EXPECT_EQ(got, 42);
  EXPECT_NE(log::lastError().find("bootstrap: refused connection from " + who + ": wrong secret"),
            std::string::npos)
      << log::lastError();
}

TEST(BootstrapFaults, MissingRankTimesOutWithoutHanging) {
  test::ScopedEnv e("FERRY_INIT_TIMEOUT_MS", "3000");  // the root gives up too
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  const int64_t timeoutMs = 1500;
  int64_t t0 = nowMs();
  // Rank 2 of 3 never shows up.
  auto st = test::runThreads(2, [&](int rank) -> Status {
    return Bootstrap::create(id, rank, 3, nullptr, timeoutMs).status();
  });
  int64_t took = nowMs() - t0;
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(st[r].code(), Code::kTimeout) << st[r].message();
    EXPECT_NE(st[r].message().find("waiting for the root"), std::string::npos) << st[r].message();
  }
  EXPECT_GE(took, timeoutMs - 10);
  EXPECT_LT(took, timeoutMs + 2500);
}

TEST(BootstrapFaults, RankWithWrongSecretFailsFast) {
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  ncclUniqueId forged = id;
  forged.internal[0] ^= 0x5a;
  int64_t t0 = nowMs();
  auto r = Bootstrap::create(forged, 0, 2, nullptr, 10000);
  EXPECT_EQ(r.status().code(), Code::kRemote) << r.status().message();
  EXPECT_LT(nowMs() - t0, 3000);
}

TEST(BootstrapFaults, MismatchedNranksIsRefused) {
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  auto first = test::runThreads(1, [&](int) -> Status {
    return Bootstrap::create(id, 0, 2, nullptr, 1500).status();
  });
  (void)first;
  // Rank 0 (of 2, in the root's process) told the root nranks = 2.
  int64_t t0 = nowMs();
  auto r = Bootstrap::create(id, 1, 3, nullptr, 3000);
  EXPECT_EQ(r.status().code(), Code::kInvalidUsage) << r.status().message();
  EXPECT_NE(r.status().message().find("mismatch"), std::string::npos) << r.status().message();
  EXPECT_LT(nowMs() - t0, 1000);  // refused at once
}

TEST(BootstrapFaults, DuplicateRankIsRefusedAndFailsEveryRank) {
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  std::vector<Status> st(2);
  int64_t t0 = nowMs();
  std::thread a([&] { st[0] = Bootstrap::create(id, 0, 2, nullptr, 20000).status(); });
  usleep(500 * 1000);  // a has checked in
  st[1] = Bootstrap::create(id, 0, 2, nullptr, 20000).status();
  a.join();
  EXPECT_EQ(st[1].code(), Code::kInvalidUsage) << st[1].message();
  EXPECT_NE(st[1].message().find("duplicate check-in of rank 0"), std::string::npos)
      << st[1].message();
  // The well-behaved rank learns why instead of waiting for its deadline.
  EXPECT_EQ(st[0].code(), Code::kInvalidUsage) << st[0].message();
  EXPECT_NE(st[0].message().find("duplicate check-in of rank 0"), std::string::npos)
      << st[0].message();
  EXPECT_LT(nowMs() - t0, 5000);
}

TEST(BootstrapFaults, InvalidArguments) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  EXPECT_EQ(Bootstrap::create(id, 0, 1, nullptr, 100).status().code(), Code::kInvalidArgument);
  ASSERT_TRUE(createUniqueId(&id).isOk());
  EXPECT_EQ(Bootstrap::create(id, 2, 2, nullptr, 100).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Bootstrap::create(id, -1, 2, nullptr, 100).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace ferry
