// Set-up that cannot complete, intruders on the listener, and the choice
// of network (NCCL_NET).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "core/log.h"
#include "core/wait.h"
#include "harness.h"
#include "transports/netsocket/socket_net.h"

namespace ferry::nxtest {
namespace {

bool startsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool endsWith(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

TEST(NetSetup, PeerThatNeverPumpsTimesOutNamingThePeer) {
  // Rank 2 prepared (its handle is known) but never calls connect, so nobody
  // accepts on its listener; ranks 0 and 1 still reach each other.
  ThreadComm comm(3, 0x77, 1500);
  ASSERT_TRUE(comm.setupAndPrepare().isOk());
  auto st = runThreads(2, [&](int r) -> Status {
    FERRY_ASSIGN(comm.conns[r][1 - r], comm.tr[r]->connect(comm.ctx[r], 1 - r));
    return exchange(*comm.conns[r][1 - r], r, 1 - r, 20, 64 << 10, 10000);
  });
  ASSERT_TRUE(st[0].isOk()) << st[0].message();
  ASSERT_TRUE(st[1].isOk()) << st[1].message();
  int64_t t0 = nowMs();
  auto c = comm.tr[0]->connect(comm.ctx[0], 2);
  int64_t ms = nowMs() - t0;
  EXPECT_EQ(c.status().code(), Code::kTimeout) << c.status().message();
  const std::string& m = c.status().message();
  EXPECT_TRUE(startsWith(m, "connecting to Socket rank 2: no progress for ")) << m;
  EXPECT_TRUE(endsWith(m, " ms while connecting over the network")) << m;
  EXPECT_GE(ms, 1500);
  EXPECT_LT(ms, 3500);
}

TEST(NetSetup, AbortFromAnotherThreadEndsConnectPromptly) {
  ThreadComm comm(2, 0x77, 60000);
  ASSERT_TRUE(comm.setupAndPrepare().isOk());
  int64_t setAt = 0;
  std::thread aborter([&] {
    usleep(300 * 1000);
    setAt = nowMs();
    comm.abortFlag.store(true);
  });
  auto c = comm.tr[0]->connect(comm.ctx[0], 1);  // rank 1 never comes
  int64_t returnedAt = nowMs();
  aborter.join();
  EXPECT_EQ(c.status().code(), Code::kRemote) << c.status().message();
  EXPECT_EQ(c.status().message(),
            "connecting to Socket rank 1: communicator aborted while connecting over the network");
  EXPECT_GT(setAt, 0);
  EXPECT_LT(returnedAt - setAt, 1000);
}

// A raw Socket-network client that sends `bytes` of `data` as its hello to
// a listen handle. Returns "" or what failed.
struct Intruder {
  const ncclNet_v11_t* n = socketNet();
  void* ctx = nullptr;
  void* send = nullptr;
  void* mh = nullptr;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  std::vector<char> buf = std::vector<char>(64 << 10);

  std::string sayHello(const std::vector<char>& h, const void* data, size_t bytes) {
    if (!h.empty()) memcpy(handle, h.data(), std::min(h.size(), sizeof(handle)));
    if (n->init(&ctx, 0x999, nullptr, nullptr, nullptr) != ncclSuccess) return "init";
    int64_t deadline = nowMs() + 5000;
    while (!send) {
      if (n->connect(ctx, 0, handle, &send, nullptr) != ncclSuccess) return "connect";
      if (nowMs() > deadline) return "connect timed out";
      usleep(1000);
    }
    if (n->regMr(send, buf.data(), buf.size(), NCCL_PTR_HOST, &mh) != ncclSuccess) return "regMr";
    memcpy(buf.data(), data, bytes);
    return sendWait(bytes) == ncclSuccess ? "" : "hello not sent";
  }
  ncclResult_t sendWait(size_t bytes) {
    void* req = nullptr;
    int64_t deadline = nowMs() + 5000;
    while (!req) {
      ncclResult_t r = n->isend(send, buf.data(), bytes, 0, mh, nullptr, &req);
      if (r != ncclSuccess) return r;
      if (nowMs() > deadline) return ncclInProgress;
    }
    for (int done = 0; !done;) {
      ncclResult_t r = n->test(req, &done, nullptr);
      if (r != ncclSuccess) return r;
      if (nowMs() > deadline) return ncclInProgress;
    }
    return ncclSuccess;
  }
  ~Intruder() {
    if (send) n->closeSend(send);
    if (ctx) n->finalize(ctx);
  }
};

constexpr uint64_t kSecret = 0x5ec2e7;  // ThreadComm's CommContext::secret

TEST(NetSetup, BadHellosAreRefusedWithAWarnAndRealPairsStillConnect) {
  ThreadComm comm(2);
  ASSERT_TRUE(comm.setupAndPrepare().isOk());
  Status st1;
  std::thread rank1([&] {  // pumps its listener while waiting for rank 0
    auto c = comm.tr[1]->connect(comm.ctx[1], 0);
    st1 = c.status();
    if (c.isOk()) comm.conns[1][0] = c.take();
  });
  struct Case {
    net::Hello hello;
    size_t bytes;
    std::string warn;
  } cases[] = {
      {{0x77, 0, 0x12345678, kSecret}, sizeof(net::Hello),
       "net: refused a connection with a bad hello (rank 0, magic 0x12345678)"},
      {{0x77, 5, 0x46524e48, kSecret}, sizeof(net::Hello),
       "net: refused a connection with a bad hello (rank 5, magic 0x46524e48)"},
      {{0x77, 1, 0x46524e48, kSecret}, sizeof(net::Hello),  // rank 1 itself
       "net: refused a connection with a bad hello (rank 1, magic 0x46524e48)"},
      {{0x77, 0, 0x46524e48, kSecret}, 8,  // short: only the commHash arrives
       "net: refused a connection with a bad hello (rank -1, magic 0)"},
  };
  std::vector<std::unique_ptr<Intruder>> intruders;
  for (const Case& c : cases) {
    intruders.push_back(std::make_unique<Intruder>());
    ASSERT_EQ(intruders.back()->sayHello(comm.handle(1), &c.hello, c.bytes), "");
    int64_t deadline = nowMs() + 5000;
    while (log::lastError() != c.warn && nowMs() < deadline) usleep(2000);
    EXPECT_EQ(log::lastError(), c.warn);
  }
  auto c0 = comm.tr[0]->connect(comm.ctx[0], 1);
  rank1.join();
  ASSERT_TRUE(c0.isOk()) << c0.status().message();
  ASSERT_TRUE(st1.isOk()) << st1.message();
  comm.conns[0][1] = c0.take();
  auto st = runThreads(2, [&](int r) { return exchange(*comm.conns[r][1 - r], r, 1 - r, 30, 64 << 10, 10000); });
  EXPECT_TRUE(st[0].isOk()) << st[0].message();
  EXPECT_TRUE(st[1].isOk()) << st[1].message();
}

TEST(NetSetup, RankOfAnotherCommunicatorIsRefusedAndDoesNotDisturbThePair) {
  ThreadComm a(2, 0x77);
  ASSERT_TRUE(a.setupAndPrepare().isOk());
  // Communicator B's rank 1 listeners are A's rank 1 listeners.
  ThreadComm b(2, 0x88, 1500);
  std::vector<char> aBlock = a.block(1);
  b.gather.tamper = [&](std::vector<char>& all, size_t bytes) {
    ASSERT_EQ(bytes, aBlock.size());
    memcpy(all.data() + bytes, aBlock.data(), bytes);
  };
  ASSERT_TRUE(b.setupAndPrepare().isOk());
  Status bSt;
  std::thread intruder([&] { bSt = b.tr[0]->connect(b.ctx[0], 1).status(); });
  usleep(200 * 1000);  // B's hello is queued on A's listener before A pumps
  auto st = runThreads(2, [&](int r) -> Status {
    FERRY_ASSIGN(a.conns[r][1 - r], a.tr[r]->connect(a.ctx[r], 1 - r));
    return exchange(*a.conns[r][1 - r], r, 1 - r, 30, 64 << 10, 10000);
  });
  intruder.join();
  EXPECT_TRUE(st[0].isOk()) << st[0].message();
  EXPECT_TRUE(st[1].isOk()) << st[1].message();
  EXPECT_EQ(log::lastError(), "net: refused a connection with a bad hello (rank 0, magic 0x46524e48)");
  // Nobody connects back to B's rank 0.
  EXPECT_EQ(bSt.code(), Code::kTimeout) << bSt.message();
  EXPECT_TRUE(startsWith(bSt.message(), "connecting to Socket rank 1: no progress")) << bSt.message();
}

TEST(NetSetup, NcclNetSocketIsUsedCaseInsensitively) {
  ScopedEnv net("NCCL_NET", "socket");
  ThreadComm comm(2);
  ASSERT_TRUE(comm.setupAndPrepare().isOk());
  auto st = runThreads(2, [&](int r) -> Status {
    FERRY_ASSIGN(comm.conns[r][1 - r], comm.tr[r]->connect(comm.ctx[r], 1 - r));
    return exchange(*comm.conns[r][1 - r], r, 1 - r, 12, 64 << 10, 10000);
  });
  ASSERT_TRUE(st[0].isOk()) << st[0].message();
  ASSERT_TRUE(st[1].isOk()) << st[1].message();
  EXPECT_EQ(comm.conns[1][0]->describe(), "Socket/0 rank 0 (host0)");
}

TEST(NetSetup, UnknownNcclNetFailsSetupNamingTheAvailableNetworks) {
  ScopedEnv net("NCCL_NET", "NoSuchNet");
  ThreadComm comm(2);
  PeerInfo self = comm.peers[0];
  Status st = comm.tr[0]->setup(comm.ctx[0], &self);
#ifdef FERRY_HAVE_UCX
  const char* have = "Socket, UCX";
#else
  const char* have = "Socket";
#endif
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_EQ(st.message(),
            std::string("NCCL_NET=NoSuchNet names no available network (have: ") + have + ")");
}

TEST(NetSetup, OneHostNeedsNoNetworkUnlessShmIsDisabled) {
  {
    ThreadComm comm(2);
    for (PeerInfo& p : comm.peers) p.hostHash = 0x42;
    ASSERT_TRUE(comm.setupAndPrepare().isOk());
    EXPECT_TRUE(comm.gather.round(0).empty());  // no allgather took place
    auto c = comm.tr[0]->connect(comm.ctx[0], 1);
    EXPECT_EQ(c.status().code(), Code::kInternal);
    EXPECT_EQ(c.status().message(),
              "no network was set up for this communicator (rank 1 must be reached over the network)");
  }
  ScopedEnv shm("NCCL_SHM_DISABLE", "1");
  ThreadComm comm(2);
  for (PeerInfo& p : comm.peers) p.hostHash = 0x42;
  ASSERT_TRUE(comm.setupAndPrepare().isOk());
  auto st = runThreads(2, [&](int r) -> Status {
    FERRY_ASSIGN(comm.conns[r][1 - r], comm.tr[r]->connect(comm.ctx[r], 1 - r));
    return exchange(*comm.conns[r][1 - r], r, 1 - r, 12, 64 << 10, 10000);
  });
  EXPECT_TRUE(st[0].isOk()) << st[0].message();
  EXPECT_TRUE(st[1].isOk()) << st[1].message();
}


// A connection that knows the communicator's hash but not its secret (the
// old socket transport checked the secret on every connection).
TEST(NetSetup, HelloWithoutTheSecretDoesNotBecomeAPeer) {
  ThreadComm comm(2);
  ASSERT_TRUE(comm.setupAndPrepare().isOk());
  Status st1;
  std::thread rank1([&] {
    auto c = comm.tr[1]->connect(comm.ctx[1], 0);
    st1 = c.status();
    if (c.isOk()) comm.conns[1][0] = c.take();
  });
  net::Hello spoof{0x77, 0, 0x46524e48, kSecret + 1};
  Intruder in;
  ASSERT_EQ(in.sayHello(comm.handle(1), &spoof, sizeof(spoof)), "");
  std::string warn = "net: refused a connection with a bad hello (rank 0, magic 0x46524e48)";
  int64_t deadline = nowMs() + 5000;
  while (log::lastError() != warn && nowMs() < deadline) usleep(2000);
  EXPECT_EQ(log::lastError(), warn);
  auto c0 = comm.tr[0]->connect(comm.ctx[0], 1);
  rank1.join();
  ASSERT_TRUE(c0.isOk()) << c0.status().message();
  ASSERT_TRUE(st1.isOk()) << st1.message();
  comm.conns[0][1] = c0.take();
  auto st = runThreads(2, [&](int r) { return exchange(*comm.conns[r][1 - r], r, 1 - r, 10, 4096, 3000); });
  EXPECT_TRUE(st[0].isOk()) << st[0].message();
  EXPECT_TRUE(st[1].isOk()) << st[1].message();
}

}  // namespace
}  // namespace ferry::nxtest
