// Bootstrap with ranks as threads of one process.
#include <gtest/gtest.h>

#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "core/wait.h"
#include "net/interfaces.h"
#include "tests/support/test_util.h"

namespace ferry {
namespace {

constexpr int64_t kTimeoutMs = 20000;

class BootstrapThreads : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapThreads, RendezvousAllGatherBarrierSendRecv) {
  test::ScopedEnv e("NCCL_COMM_ID", std::nullopt);
  int n = GetParam();
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  uint64_t secret = bootstrap::decodeId(id).secret;
  auto st = test::runThreads(n, [&](int rank) -> Status {
    FERRY_ASSIGN(auto b, Bootstrap::create(id, rank, n, nullptr, kTimeoutMs));
    if (b->rank() != rank || b->nranks() != n || b->secret() != secret) {
      return internalError("wrong identity");
    }
    if (static_cast<int>(b->peerAddrs().size()) != n) return internalError("wrong table");
    return test::exerciseBootstrap(*b);
  });
  for (int r = 0; r < n; r++) EXPECT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].message();
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapThreads, ::testing::Range(1, 9));

TEST(Bootstrap, CommIdModeRankZeroHostsTheRoot) {
  int port = test::freePort();
  test::ScopedEnv e("NCCL_COMM_ID", "127.0.0.1:" + std::to_string(port));
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  const int n = 4;
  auto st = test::runThreads(n, [&](int rank) -> Status {
    // The other ranks come first and must keep retrying until rank 0's root is up.
    if (rank == 0) usleep(300 * 1000);
    FERRY_ASSIGN(auto b, Bootstrap::create(id, rank, n, nullptr, kTimeoutMs));
    if (b->secret() != bootstrap::kCommIdMagic) return internalError("wrong secret");
    return test::exerciseBootstrap(*b);
  });
  for (int r = 0; r < n; r++) EXPECT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].message();
}

TEST(Bootstrap, Ipv6) {
  test::ScopedEnv e("NCCL_SOCKET_FAMILY", "AF_INET6");
  if (!findInterfaces(1).isOk()) GTEST_SKIP() << "no IPv6 interface on this machine";
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  EXPECT_EQ(bootstrap::decodeId(id).root.family(), AF_INET6);
  const int n = 3;
  auto st = test::runThreads(n, [&](int rank) -> Status {
    FERRY_ASSIGN(auto b, Bootstrap::create(id, rank, n, nullptr, kTimeoutMs));
    for (const auto& a : b->peerAddrs()) {
      if (a.family() != AF_INET6) return internalError("peer address " + a.toString());
    }
    return test::exerciseBootstrap(*b);
  });
  for (int r = 0; r < n; r++) EXPECT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].message();
}

TEST(Bootstrap, RootExitsAtItsDeadline) {
  test::ScopedEnv e("FERRY_INIT_TIMEOUT_MS", "300");
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  SockAddr root = bootstrap::decodeId(id).root;
  ASSERT_TRUE(connectSocket(root, Until::after(1000)).isOk());
  usleep(700 * 1000);
  auto late = connectSocket(root, Until::after(200));
  EXPECT_EQ(late.status().code(), Code::kTimeout) << "the root still listens";
}

TEST(Bootstrap, FreshIdIgnoresCommIdEvenWhenSet) {
  int port = test::freePort();
  test::ScopedEnv e("NCCL_COMM_ID", "127.0.0.1:" + std::to_string(port));
  ncclUniqueId id;
  ASSERT_TRUE(createFreshUniqueId(&id).isOk());
  EXPECT_NE(bootstrap::decodeId(id).secret, bootstrap::kCommIdMagic);
  auto st = test::runThreads(2, [&](int rank) -> Status {
    FERRY_ASSIGN(auto b, Bootstrap::create(id, rank, 2, nullptr, kTimeoutMs));
    return test::exerciseBootstrap(*b);
  });
  EXPECT_TRUE(st[0].isOk()) << st[0].message();
  EXPECT_TRUE(st[1].isOk()) << st[1].message();
}

TEST(Bootstrap, RecvSizeMismatchIsAnError) {
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  auto st = test::runThreads(2, [&](int rank) -> Status {
    FERRY_ASSIGN(auto b, Bootstrap::create(id, rank, 2, nullptr, kTimeoutMs));
    char buf[16] = {};
    if (rank == 0) {
      FERRY_TRY(b->send(1, 5, buf, 8));
      return b->send(1, 6, buf, 4);
    }
    Status bad = b->recv(0, 5, buf, 16);
    if (bad.code() != Code::kInternal || bad.message().find("8 bytes, expected 16") ==
                                             std::string::npos) {
      return internalError("expected a size error, got: " + bad.message());
    }
    return b->recv(0, 6, buf, 4);  // later messages still flow
  });
  EXPECT_TRUE(st[0].isOk()) << st[0].message();
  EXPECT_TRUE(st[1].isOk()) << st[1].message();
}

TEST(Bootstrap, AbortUnblocksRecv) {
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  std::atomic<bool> commAbort{false};
  std::vector<std::unique_ptr<Bootstrap>> bs(2);
  auto st = test::runThreads(2, [&](int rank) -> Status {
    FERRY_ASSIGN(bs[rank], Bootstrap::create(id, rank, 2, &commAbort, kTimeoutMs));
    return Status::ok();
  });
  ASSERT_TRUE(st[0].isOk() && st[1].isOk()) << st[0].message() << st[1].message();

  // Bootstrap::abort() from another thread.
  std::thread t([&] {
    usleep(200 * 1000);
    bs[0]->abort();
  });
  int64_t t0 = nowMs();
  char c;
  Status r = bs[0]->recv(1, 1, &c, 1);
  t.join();
  EXPECT_EQ(r.code(), Code::kRemote) << r.message();
  EXPECT_LT(nowMs() - t0, 3000);
  EXPECT_FALSE(bs[0]->barrier().isOk());

  // The communicator's abort flag.
  std::thread t2([&] {
    usleep(200 * 1000);
    commAbort = true;
  });
  t0 = nowMs();
  r = bs[1]->recv(0, 1, &c, 1);
  t2.join();
  EXPECT_EQ(r.code(), Code::kRemote) << r.message();
  EXPECT_NE(r.message().find("aborted"), std::string::npos) << r.message();
  EXPECT_LT(nowMs() - t0, 3000);
}

}  // namespace
}  // namespace ferry
