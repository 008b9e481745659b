// Ranks as forked processes: the allgathers go over the real bootstrap, the
// pieces over NetTransport + Socket; a peer killed with SIGKILL must show up
// as a remote error on the survivor within a couple of seconds.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/wait.h"
#include "harness.h"

namespace ferry::nxtest {
namespace {

using test::SharedId;

class BootstrapExchange : public PeerExchange {
 public:
  explicit BootstrapExchange(Bootstrap& b) : b_(b) {}
  Status allGather(void* all, size_t bytesPerRank) override { return b_.allGather(all, bytesPerRank); }

 private:
  Bootstrap& b_;
};

// One process's rank: bootstrap, PeerInfo allgather, transport prepare.
struct ProcRank {
  std::unique_ptr<Bootstrap> boot;
  std::unique_ptr<BootstrapExchange> ex;
  std::vector<PeerInfo> peers;
  std::atomic<bool> abortFlag{false};
  CommContext ctx;
  net::NetTransport tr;

  Status init(const ncclUniqueId& id, int rank, int n) {
    FERRY_ASSIGN(boot, Bootstrap::create(id, rank, n, &abortFlag, 30000));
    ex = std::make_unique<BootstrapExchange>(*boot);
    peers.resize(n);
    ctx = CommContext{rank, n, 0x99, boot->secret(), &peers, &abortFlag, 20000, ex.get()};
    PeerInfo self;
    self.rank = rank;
    self.pid = getpid();
    self.hostHash = 0x2000 + rank;
    snprintf(self.hostname, sizeof(self.hostname), "host%d", rank);
    FERRY_TRY(tr.setup(ctx, &self));
    peers[rank] = self;
    FERRY_TRY(boot->allGather(peers.data(), sizeof(PeerInfo)));
    return tr.prepare(ctx);
  }
};

int meshChild(const ncclUniqueId& id, int rank, int n) {
  ProcRank pr;
  CHILD_OK(pr.init(id, rank, n));
  std::vector<std::unique_ptr<Connection>> conns(n);
  for (int i = 1; i < n; i++) {  // next first, as in a ring
    int p = (rank + i) % n;
    auto c = pr.tr.connect(pr.ctx, p);
    CHILD_OK(c.status());
    conns[p] = c.take();
    // The Socket network notes its sockets: an executor may block on them.
    CHILD_OK(conns[p]->waitsOnFds() ? Status::ok() : internalError("Socket connection: waitsOnFds() false"));
  }
  std::vector<Pump> pumps;
  for (int p = 0; p < n; p++)
    if (p != rank) pumps.emplace_back(*conns[p], rank, p, 200, 512 << 10);
  CHILD_OK(pumpAll(pumps, 20000));
  CHILD_OK(pr.boot->barrier());  // nobody closes while a peer still reads
  return 0;
}

TEST(NetProcs, ThreeProcessMeshExactPiecesBothWays) {
  SharedId sid;  // made once the ranks are forked (see runProcesses)
  bool made = false;
  auto codes = runProcesses(3, [&](int r) {
    ncclUniqueId id;
    CHILD_CHECK(sid.wait(&id), "no unique id");
    return meshChild(id, r, 3);
  }, 60000, [&] { sid.publish(made = createUniqueId(sid.id()).isOk()); });
  EXPECT_TRUE(made);
  for (int r = 0; r < 3; r++) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

int deathChild(const ncclUniqueId& id, int rank) {
  ProcRank pr;
  CHILD_OK(pr.init(id, rank, 2));
  auto c = pr.tr.connect(pr.ctx, 1 - rank);
  CHILD_OK(c.status());
  CHILD_OK(exchange(*c.value(), rank, 1 - rank, 20, 512 << 10, 20000));
  CHILD_OK(pr.boot->barrier());
  if (rank == 1) kill(getpid(), SIGKILL);
  // Rank 0 keeps exchanging with a peer that is gone.
  int64_t t0 = nowMs();
  Status st = exchange(*c.value(), rank, 1, 1000, 512 << 10, 20000);
  int64_t ms = nowMs() - t0;
  CHILD_CHECK(st.code() == Code::kRemote, "expected kRemote, got %d: %s",
                 static_cast<int>(st.code()), st.message().c_str());
  CHILD_CHECK(st.message().find(" on Socket/0 rank 1 (host1)") != std::string::npos, "%s",
                 st.message().c_str());
  CHILD_CHECK(ms < 3000, "the death was noticed after %ld ms", static_cast<long>(ms));
  return 0;
}

TEST(NetProcs, PeerDeathIsARemoteErrorWithinSeconds) {
  SharedId sid;  // made once the ranks are forked (see runProcesses)
  bool made = false;
  auto codes = runProcesses(2, [&](int r) {
    ncclUniqueId id;
    CHILD_CHECK(sid.wait(&id), "no unique id");
    return deathChild(id, r);
  }, 60000, [&] { sid.publish(made = createUniqueId(sid.id()).isOk()); });
  EXPECT_TRUE(made);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 128 + SIGKILL);
}


// Rank 1 dies after prepare, before anyone connects: rank 0's connect(1)
// fails (bounded by its timeout) and names rank 1.
int deadBeforeConnectChild(const ncclUniqueId& id, int rank) {
  ProcRank pr;
  CHILD_OK(pr.init(id, rank, 2));
  CHILD_OK(pr.boot->barrier());
  if (rank == 1) kill(getpid(), SIGKILL);
  usleep(100 * 1000);  // surely dead
  pr.ctx.timeoutMs = 2000;
  int64_t t0 = nowMs();
  auto c = pr.tr.connect(pr.ctx, 1);
  int64_t ms = nowMs() - t0;
  // A refused TCP connect is retried (the listener may not be up yet), so
  // this is the no-progress deadline.
  CHILD_CHECK(c.status().code() == Code::kTimeout, "code %d: %s",
                 static_cast<int>(c.status().code()), c.status().message().c_str());
  const std::string& m = c.status().message();
  CHILD_CHECK(m.rfind("connecting to Socket rank 1: ", 0) == 0, "%s", m.c_str());
  CHILD_CHECK(ms >= 2000 && ms < 4000, "connect failed after %ld ms: %s", static_cast<long>(ms), m.c_str());
  return 0;
}

TEST(NetProcs, PeerDeadBeforeConnectFailsConnectNamingIt) {
  SharedId sid;  // made once the ranks are forked (see runProcesses)
  bool made = false;
  auto codes = runProcesses(2, [&](int r) {
    ncclUniqueId id;
    CHILD_CHECK(sid.wait(&id), "no unique id");
    return deadBeforeConnectChild(id, r);
  }, 60000, [&] { sid.publish(made = createUniqueId(sid.id()).isOk()); });
  EXPECT_TRUE(made);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 128 + SIGKILL);
}

}  // namespace
}  // namespace ferry::nxtest
