// Peers that know the secret but send nonsense: forged check-ins, and real ranks that disagree (nranks mismatch, duplicate
// rank), which must fail every rank at once instead of at the init deadline.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"
#include "tests/support/test_util.h"

namespace ferry {
namespace {

using namespace bootstrap;

// A connection that presents the real secret and then `payload`.
Socket forge(const SockAddr& to, uint64_t secret, uint32_t type, const void* payload,
             size_t bytes) {
  Socket s = connectSocket(to, Until::after(5000)).take();
  std::vector<uint8_t> msg(sizeof(ConnHeader) + bytes);
  ConnHeader h{secret, type};
  std::memcpy(msg.data(), &h, sizeof(h));
  std::memcpy(msg.data() + sizeof(h), payload, bytes);
  EXPECT_TRUE(sendAll(s, msg.data(), msg.size(), Until::after(5000)).isOk());
  return s;
}

Socket forgeCheckIn(const SockAddr& root, uint64_t secret, int rank, int nranks) {
  CheckIn ci{};
  ci.rank = rank;
  ci.nranks = nranks;
  return forge(root, secret, kCheckIn, &ci, sizeof(ci));
}

void expectRefused(Socket& s, int32_t status, const char* what) {
  RootReply rep{};
  Status st = recvAll(s, &rep, sizeof(rep), Until::after(5000));
  EXPECT_TRUE(st.isOk()) << what << ": " << st.message();
  EXPECT_EQ(rep.status, status) << what;
}

TEST(BootstrapForge, ForgedCheckInsNeitherCrashNorBlockRealRanks) {
  test::ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  test::ScopedEnv e("NCCL_COMM_ID", std::nullopt);
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  IdContents idc = decodeId(id);
  Socket intMax = forgeCheckIn(idc.root, idc.secret, 0, INT_MAX);
  Socket outOfRange = forgeCheckIn(idc.root, idc.secret, 4, 4);
  Socket negative = forgeCheckIn(idc.root, idc.secret, -1, 4);
  Socket million = forgeCheckIn(idc.root, idc.secret, 0, 1000000);
  Socket million5 = forgeCheckIn(idc.root, idc.secret, 5, 1000000);
  usleep(200 * 1000);  // the root has seen them before any real rank
  const int n = 4;
  int64_t t0 = nowMs();
  auto st = test::runThreads(n, [&](int rank) -> Status {
    FERRY_ASSIGN(auto b, Bootstrap::create(id, rank, n, nullptr, 60000));
    return test::exerciseBootstrap(*b);
  });
  for (int r = 0; r < n; r++) EXPECT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].message();
  EXPECT_LT(nowMs() - t0, 10000);
  expectRefused(intMax, kReplyInvalid, "nranks INT_MAX");
  expectRefused(outOfRange, kReplyInvalid, "rank 4 of 4");
  expectRefused(negative, kReplyInvalid, "rank -1");
  expectRefused(million, kReplyMismatch, "nranks 1000000");
  expectRefused(million5, kReplyMismatch, "rank 5 of 1000000");
}

TEST(BootstrapForge, ForgedCheckInFirstDoesNotBlockRanksInOtherProcesses) {
  // The root runs here, without rank 0: it cannot know nranks, so the group
  // of check-ins that fills up first wins.
  test::ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  test::ScopedEnv e("NCCL_COMM_ID", std::nullopt);
  // The id (and the root thread) is made once the ranks are forked (see
  // runProcesses); they get it after the forged check-ins.
  test::SharedId sid;
  bool made = false;
  Socket million, intMax;
  const int n = 4;
  auto codes = test::runProcesses(n, [&](int rank) {
    ncclUniqueId id;
    CHILD_CHECK(sid.wait(&id, 60000), "no unique id");
    auto b = Bootstrap::create(id, rank, n, nullptr, 60000);
    CHILD_OK(b.status());
    CHILD_OK(test::exerciseBootstrap(*b.value()));
    return 0;
  }, 60000, [&] {
    made = createUniqueId(sid.id()).isOk();
    if (made) {
      IdContents idc = decodeId(*sid.id());
      million = forgeCheckIn(idc.root, idc.secret, 0, 1000000);
      intMax = forgeCheckIn(idc.root, idc.secret, 1, INT_MAX);
      usleep(200 * 1000);  // the root has seen them before any real rank
    }
    sid.publish(made);
  });
  EXPECT_TRUE(made);
  for (int r = 0; r < n; r++) EXPECT_EQ(codes[r], 0) << "rank " << r;
  expectRefused(million, kReplyMismatch, "nranks 1000000");
  expectRefused(intMax, kReplyInvalid, "nranks INT_MAX");
}

// The id, from the process that made it, for forked ranks.
struct SharedId {
  std::atomic<int> ready;
  ncclUniqueId id;
};

// Rank `rank` claims `nranks`; creation must fail with ncclInvalidUsage
// naming `needle` well before the (default, 120 s) init deadline.
int expectFastFailure(SharedId* sh, bool rank0MakesId, int rank, int nranks,
                      const char* needle) {
  if (rank0MakesId && rank == 0) {
    CHILD_OK(createUniqueId(&sh->id));
    sh->ready.store(1);
  }
  for (int64_t end = nowMs() + 10000; !sh->ready.load() && nowMs() < end;) usleep(1000);
  CHILD_CHECK(sh->ready.load(), "no id");
  int64_t timeoutMs = config::getInt(config::Param::kInitTimeoutMs);
  int64_t t0 = nowMs();
  auto b = Bootstrap::create(sh->id, rank, nranks, nullptr, timeoutMs);
  int64_t took = nowMs() - t0;
  CHILD_CHECK(!b.isOk(), "rank %d was created", rank);
  const Status& st = b.status();
  printf("rank %d (nranks %d) failed after %lld ms: %s\n", rank, nranks,
         static_cast<long long>(took), st.message().c_str());
  CHILD_CHECK(st.code() == Code::kInvalidUsage, "rank %d: code %d", rank,
              static_cast<int>(st.code()));
  CHILD_CHECK(st.message().find(needle) != std::string::npos, "rank %d: no '%s'", rank, needle);
  CHILD_CHECK(took < 5000, "rank %d took %lld ms", rank, static_cast<long long>(took));
  return 0;
}

struct FastFailCase {
  const char* name;
  bool rank0MakesId;     // the root runs in rank 0's process (it knows nranks)
  std::vector<int> rank;
  std::vector<int> nranks;
  const char* needle;
};

void PrintTo(const FastFailCase& c, std::ostream* os) { *os << c.name; }

class BootstrapFastFail : public ::testing::TestWithParam<FastFailCase> {};

TEST_P(BootstrapFastFail, AllRanksFailWithinSeconds) {
  const FastFailCase& c = GetParam();
  test::ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  test::ScopedEnv e("NCCL_COMM_ID", std::nullopt);
  test::ScopedEnv t("FERRY_INIT_TIMEOUT_MS", std::nullopt);  // the 120 s default
  ASSERT_GE(config::getInt(config::Param::kInitTimeoutMs), 60000);
  auto* sh = static_cast<SharedId*>(mmap(nullptr, sizeof(SharedId), PROT_READ | PROT_WRITE,
                                         MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(sh, MAP_FAILED);
  sh->ready.store(0);
  int n = static_cast<int>(c.rank.size());
  int64_t t0 = nowMs();
  auto codes = test::runProcesses(n, [&](int i) {
    return expectFastFailure(sh, c.rank0MakesId, c.rank[i], c.nranks[i], c.needle);
  }, 30000, [&] {
    // Made here once the ranks are forked (see runProcesses).
    if (!c.rank0MakesId) {
      EXPECT_TRUE(createUniqueId(&sh->id).isOk());
      sh->ready.store(1);
    }
  });
  int64_t took = nowMs() - t0;
  printf("%s: all %d ranks failed within %lld ms\n", c.name, n, static_cast<long long>(took));
  for (int i = 0; i < n; i++) EXPECT_EQ(codes[i], 0) << "process " << i;
  EXPECT_LT(took, 10000);
  munmap(sh, sizeof(SharedId));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BootstrapFastFail,
    ::testing::Values(
        FastFailCase{"MismatchRootInRank0", true, {0, 1, 2, 3}, {4, 4, 4, 5}, "mismatch"},
        FastFailCase{"MismatchRootElsewhere", false, {0, 1, 2, 3}, {4, 4, 4, 5}, "mismatch"},
        FastFailCase{"MismatchSmallerRootInRank0", true, {0, 1, 2}, {4, 4, 3}, "mismatch"},
        FastFailCase{"DuplicateRootInRank0", true, {0, 1, 1}, {3, 3, 3}, "duplicate"},
        FastFailCase{"DuplicateRootElsewhere", false, {0, 1, 1, 2, 2}, {4, 4, 4, 4, 4},
                     "duplicate"}),
    [](const ::testing::TestParamInfo<FastFailCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace ferry
