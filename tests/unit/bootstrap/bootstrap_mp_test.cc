// Bootstrap with ranks as forked processes (each run has a watchdog).
#include <gtest/gtest.h>

#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/wait.h"
#include "tests/support/test_util.h"

namespace ferry {
namespace {

constexpr int64_t kWatchdogMs = 60000;

int childRun(const ncclUniqueId& id, int rank, int n) {
  auto b = Bootstrap::create(id, rank, n, nullptr, 30000);
  CHILD_OK(b.status());
  CHILD_OK(test::exerciseBootstrap(*b.value()));
  return 0;
}

class BootstrapProcs : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapProcs, RendezvousAllGatherBarrierSendRecv) {
  test::ScopedEnv e("NCCL_COMM_ID", std::nullopt);
  int n = GetParam();
  // The id (and with it the root thread) is made once the ranks are forked:
  // see runProcesses.
  test::SharedId sid;
  bool made = false;
  auto codes = test::runProcesses(n, [&](int rank) {
    ncclUniqueId id;
    CHILD_CHECK(sid.wait(&id), "no unique id");
    return childRun(id, rank, n);
  }, kWatchdogMs, [&] { sid.publish(made = createUniqueId(sid.id()).isOk()); });
  EXPECT_TRUE(made);
  for (int r = 0; r < n; r++) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapProcs, ::testing::Values(1, 2, 3, 5, 8));

TEST(BootstrapProcsCommId, RankZeroProcessHostsTheRoot) {
  int port = test::freePort();
  test::ScopedEnv e("NCCL_COMM_ID", "127.0.0.1:" + std::to_string(port));
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  const int n = 4;
  auto codes = test::runProcesses(n, [&](int rank) {
    if (rank == 0) usleep(300 * 1000);  // others must wait for the root
    return childRun(id, rank, n);
  }, kWatchdogMs);
  for (int r = 0; r < n; r++) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

TEST(BootstrapProcsFaults, DeadRankFailsTheOthersWithoutHanging) {
  test::SharedId sid;
  bool made = false;
  const int n = 4;
  auto codes = test::runProcesses(n, [&](int rank) {
    ncclUniqueId id;
    CHILD_CHECK(sid.wait(&id), "no unique id");
    auto b = Bootstrap::create(id, rank, n, nullptr, 30000);
    CHILD_OK(b.status());
    if (rank == 2) _exit(7);  // dies right after the rendezvous
    int64_t t0 = nowMs();
    std::vector<int> all(n);
    Status st = b.value()->allGather(all.data(), sizeof(int));
    CHILD_CHECK(!st.isOk(), "allGather succeeded without rank 2");
    CHILD_CHECK(nowMs() - t0 < 20000, "took %ld ms", static_cast<long>(nowMs() - t0));
    return 0;
  }, kWatchdogMs, [&] { sid.publish(made = createUniqueId(sid.id()).isOk()); });
  EXPECT_TRUE(made);
  for (int r = 0; r < n; r++) EXPECT_EQ(codes[r], r == 2 ? 7 : 0) << "rank " << r;
}

}  // namespace
}  // namespace ferry
