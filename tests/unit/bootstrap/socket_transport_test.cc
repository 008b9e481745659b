// The socket transport between threads and between processes.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "core/log.h"
#include "core/wait.h"
#include "test_util.h"
#include "transports/socket/socket_transport.h"

namespace ferry {
namespace {

using socket::SocketTransport;

// The piece that `from` sends as its k-th: size varies with k, bytes with (from, k).
std::vector<char> piece(int from, int k, size_t maxBytes) {
  size_t sizes[] = {0, 1, 7, 4096, maxBytes, maxBytes / 3 + 1};
  std::vector<char> p(std::min(sizes[k % 6], maxBytes));
  for (size_t i = 0; i < p.size(); i++) p[i] = test::pattern(from, i, k);
  return p;
}

// Sends `count` pieces to the peer while receiving its `count` pieces,
// checking order and contents; step() does whatever is possible right now.
class Pump {
 public:
  Pump(Connection& c, int me, int peer, int count, size_t maxBytes)
      : c_(c), me_(me), peer_(peer), count_(count), max_(maxBytes) {}
  bool done() { return sent_ == count_ && got_ == count_ && c_.sendsDrained(); }

  Status step(bool* moved) {
    if (sent_ < count_) {
      SendSlot slot;
      FERRY_TRY(c_.trySend(&slot));
      if (slot.data) {
        auto p = piece(me_, sent_, max_);
        if (slot.capacity < p.size()) return internalError("slot too small");
        if (!p.empty()) memcpy(slot.data, p.data(), p.size());
        FERRY_TRY(c_.commitSend(p.size()));
        sent_++;
        *moved = true;
      }
    }
    if (got_ < count_) {
      RecvPiece rp;
      FERRY_TRY(c_.tryRecv(&rp));
      if (rp.ready) {
        auto want = piece(peer_, got_, max_);
        if (rp.isRef || rp.size != want.size() ||
            (rp.size && memcmp(rp.data, want.data(), rp.size) != 0)) {
          return internalError("piece " + std::to_string(got_) + " from rank " +
                               std::to_string(peer_) + " wrong (" + std::to_string(rp.size) +
                               " bytes, want " + std::to_string(want.size()) + ")");
        }
        FERRY_TRY(c_.releaseRecv());
        got_++;
        *moved = true;
      }
    }
    return c_.progress();
  }

 private:
  Connection& c_;
  int me_, peer_, count_;
  size_t max_;
  int sent_ = 0, got_ = 0;
};

Status pumpAll(std::vector<Pump>& pumps, int64_t timeoutMs) {
  Waiter w(nullptr, timeoutMs, "socket test exchange");
  while (true) {
    bool moved = false, done = true;
    for (auto& p : pumps) {
      FERRY_TRY(p.step(&moved));
      done = done && p.done();
    }
    if (done) return Status::ok();
    if (moved) {
      w.progressed();
    } else {
      FERRY_TRY(w.idle());
    }
  }
}

Status exchange(Connection& c, int me, int peer, int count, size_t maxBytes, int64_t timeoutMs) {
  std::vector<Pump> pumps{Pump(c, me, peer, count, maxBytes)};
  return pumpAll(pumps, timeoutMs);
}

// n ranks as threads of one process, each with its own transport.
struct ThreadComm {
  int n;
  std::vector<PeerInfo> peers;
  std::vector<CommContext> ctx;
  std::vector<SocketTransport> tr;
  std::atomic<bool> abortFlag{false};

  explicit ThreadComm(int nranks, uint64_t commHash = 77) : n(nranks), peers(n), ctx(n), tr(n) {
    for (int r = 0; r < n; r++) {
      ctx[r] = CommContext{r, n, commHash, 0x5ec2e7, &peers, &abortFlag, 10000};
      peers[r].rank = r;
      Status st = tr[r].setup(ctx[r], &peers[r]);
      EXPECT_TRUE(st.isOk()) << st.message();
    }
  }
};

TEST(SocketTransport, SetupPublishesListenAddress) {
  ThreadComm comm(2);
  SockAddr a = SockAddr::unpack(comm.peers[0].sockAddr, SockAddr::kPackedBytes);
  ASSERT_TRUE(a.valid());
  EXPECT_NE(a.port(), 0);
  EXPECT_TRUE(a == comm.tr[0].listenAddr());
  EXPECT_STREQ(comm.tr[0].name(), "socket");
  EXPECT_TRUE(comm.tr[0].canConnect(comm.ctx[0], comm.peers[0], comm.peers[1]));
}

void pairExchange(int count, size_t slotBytes) {
  test::ScopedEnv e("FERRY_SOCKET_SLOT_BYTES", std::to_string(slotBytes));
  ThreadComm comm(2);
  std::vector<std::unique_ptr<Connection>> conns(2);
  auto st = test::runThreads(2, [&](int r) -> Status {
    FERRY_ASSIGN(conns[r], comm.tr[r].connect(comm.ctx[r], 1 - r));
    return exchange(*conns[r], r, 1 - r, count, slotBytes, 10000);
  });
  EXPECT_TRUE(st[0].isOk()) << st[0].message();
  EXPECT_TRUE(st[1].isOk()) << st[1].message();
  if (conns[0]) {
    EXPECT_EQ(conns[0]->describe(),
              "socket " + SockAddr::unpack(comm.peers[1].sockAddr, 28).toString());
    EXPECT_FALSE(conns[0]->supportsRef());
  }
}

TEST(SocketTransport, PiecesInOrderBothDirections) { pairExchange(60, 64 << 10); }
TEST(SocketTransport, LargePieces) { pairExchange(24, 8 << 20); }
TEST(SocketTransport, ManyPieces) { pairExchange(20000, 4096); }

TEST(SocketTransport, FullMeshAnyConnectOrder) {
  const int n = 5;
  ThreadComm comm(n);
  std::vector<std::vector<std::unique_ptr<Connection>>> conns(n);
  auto st = test::runThreads(n, [&](int r) -> Status {
    conns[r].resize(n);
    // Odd ranks walk their peers downwards, so accepts see peers out of order.
    for (int i = 0; i < n - 1; i++) {
      int p = (r % 2) ? (r - 1 - i + n) % n : (r + 1 + i) % n;
      FERRY_ASSIGN(conns[r][p], comm.tr[r].connect(comm.ctx[r], p));
    }
    std::vector<Pump> pumps;
    for (int p = 0; p < n; p++) {
      if (p != r) pumps.emplace_back(*conns[r][p], r, p, 40, 4096);
    }
    return pumpAll(pumps, 10000);
  });
  for (int r = 0; r < n; r++) EXPECT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].message();
}

TEST(SocketTransport, DialDoesNotWaitForThePeersConnectCall) {
  ThreadComm comm(2);
  // Rank 0 dials and gets its connection before rank 1 ever calls connect().
  auto c0 = comm.tr[0].connect(comm.ctx[0], 1);
  ASSERT_TRUE(c0.isOk()) << c0.status().message();
  auto c1 = comm.tr[1].connect(comm.ctx[1], 0);
  ASSERT_TRUE(c1.isOk()) << c1.status().message();
  auto st = test::runThreads(2, [&](int r) -> Status {
    return exchange(r == 0 ? *c0.value() : *c1.value(), r, 1 - r, 30, 64 << 10, 10000);
  });
  EXPECT_TRUE(st[0].isOk()) << st[0].message();
  EXPECT_TRUE(st[1].isOk()) << st[1].message();
}

TEST(SocketTransport, RefusesWrongSecretAndOtherCommunicators) {
  ThreadComm comm(2);
  SockAddr addr = comm.tr[1].listenAddr();
  Until u = Until::after(5000);
  // Wrong secret, then right secret but another communicator.
  struct __attribute__((packed)) { uint64_t secret; uint32_t type; int32_t rank; uint64_t hash; }
      h1{1, 3, 0, 77}, h2{0x5ec2e7, 3, 0, 78};
  Socket i1 = connectSocket(addr, u).take();
  ASSERT_TRUE(sendAll(i1, &h1, sizeof(h1), u).isOk());
  Socket i2 = connectSocket(addr, u).take();
  ASSERT_TRUE(sendAll(i2, &h2, sizeof(h2), u).isOk());
  std::vector<std::unique_ptr<Connection>> conns(2);
  auto st = test::runThreads(2, [&](int r) -> Status {
    if (r == 0) usleep(100 * 1000);  // the intruders are accepted first
    FERRY_ASSIGN(conns[r], comm.tr[r].connect(comm.ctx[r], 1 - r));
    return exchange(*conns[r], r, 1 - r, 10, 4096, 10000);
  });
  EXPECT_TRUE(st[0].isOk()) << st[0].message();
  EXPECT_TRUE(st[1].isOk()) << st[1].message();
  EXPECT_NE(log::lastError().find("wrong communicator"), std::string::npos) << log::lastError();
  char c;
  EXPECT_EQ(recvAll(i1, &c, 1, u).code(), Code::kRemote);  // refused = closed
}

TEST(SocketTransport, PeerClosedIsRemoteError) {
  ThreadComm comm(2);
  std::vector<std::unique_ptr<Connection>> conns(2);
  auto st = test::runThreads(2, [&](int r) -> Status {
    FERRY_ASSIGN(conns[r], comm.tr[r].connect(comm.ctx[r], 1 - r));
    return Status::ok();
  });
  ASSERT_TRUE(st[0].isOk() && st[1].isOk());
  // One piece in flight, then the peer goes away: the piece is still delivered.
  SendSlot slot;
  ASSERT_TRUE(conns[1]->trySend(&slot).isOk());
  ASSERT_NE(slot.data, nullptr);
  memcpy(slot.data, "abc", 3);
  ASSERT_TRUE(conns[1]->commitSend(3).isOk());
  while (!conns[1]->sendsDrained()) usleep(1000);
  conns[1].reset();
  RecvPiece p;
  Waiter w(nullptr, 5000, "test");
  do {
    ASSERT_TRUE(conns[0]->tryRecv(&p).isOk());
    if (!p.ready) {
      ASSERT_TRUE(w.idle().isOk());
    }
  } while (!p.ready);
  EXPECT_EQ(std::string(static_cast<const char*>(p.data), p.size), "abc");
  ASSERT_TRUE(conns[0]->releaseRecv().isOk());
  Status s;
  while (s.isOk()) {
    s = conns[0]->tryRecv(&p);
    if (s.isOk()) {
      ASSERT_TRUE(w.idle().isOk());
    }
  }
  EXPECT_EQ(s.code(), Code::kRemote);
  std::string addr = SockAddr::unpack(comm.peers[1].sockAddr, 28).toString();
  EXPECT_EQ(s.message().rfind("socket: connection to rank 1 (" + addr + ") closed", 0), 0u)
      << s.message();
  EXPECT_EQ(conns[0]->progress().code(), Code::kRemote);  // sticky
}

std::vector<std::unique_ptr<Connection>> connectPair(ThreadComm& comm) {
  std::vector<std::unique_ptr<Connection>> conns(2);
  auto st = test::runThreads(2, [&](int r) -> Status {
    FERRY_ASSIGN(conns[r], comm.tr[r].connect(comm.ctx[r], 1 - r));
    return Status::ok();
  });
  EXPECT_TRUE(st[0].isOk() && st[1].isOk()) << st[0].message() << st[1].message();
  return conns;
}

TEST(SocketTransport, PeerThatClosedAfterItsWorkIsOnlyAnErrorForRecv) {
  ThreadComm comm(2);
  auto conns = connectPair(comm);
  ASSERT_TRUE(conns[0] && conns[1]);
  ASSERT_TRUE(exchange(*conns[0], 0, 1, 0, 64, 1000).isOk());
  conns[0].reset();  // rank 0 is done and destroys its communicator
  RecvPiece p;
  Status st;
  // Eventually the close is seen; progress and sendsDrained stay fine.
  for (int i = 0; i < 200; i++) {
    ASSERT_TRUE(conns[1]->progress().isOk());
    usleep(1000);
  }
  EXPECT_TRUE(conns[1]->sendsDrained());
  st = conns[1]->tryRecv(&p);
  EXPECT_EQ(st.code(), Code::kRemote) << st.message();
  EXPECT_NE(st.message().find("the peer closed the connection"), std::string::npos)
      << st.message();
}

TEST(SocketTransport, DestructorFlushesStagedPieces) {
  const size_t slot = 8 << 20;
  test::ScopedEnv e("FERRY_SOCKET_SLOT_BYTES", std::to_string(slot));
  ThreadComm comm(2);
  auto conns = connectPair(comm);
  ASSERT_TRUE(conns[0] && conns[1]);
  // 4 x 8 MiB staged: far more than the kernel takes before the peer reads.
  for (int k = 0; k < 4; k++) {
    SendSlot s;
    ASSERT_TRUE(conns[0]->trySend(&s).isOk());
    ASSERT_NE(s.data, nullptr);
    memset(s.data, 'a' + k, slot);
    ASSERT_TRUE(conns[0]->commitSend(slot).isOk());
  }
  EXPECT_FALSE(conns[0]->sendsDrained());
  Status rs;
  std::thread reader([&] {
    usleep(100 * 1000);  // the sender is already in its destructor
    Waiter w(nullptr, 10000, "reader");
    for (int k = 0; k < 4 && rs.isOk();) {
      RecvPiece p;
      rs = conns[1]->tryRecv(&p);
      if (!rs.isOk()) break;
      if (!p.ready) {
        rs = w.idle();
        continue;
      }
      w.progressed();
      const char* d = static_cast<const char*>(p.data);
      if (p.size != slot || d[0] != 'a' + k || d[slot - 1] != 'a' + k) {
        rs = internalError("piece " + std::to_string(k) + " wrong");
      }
      rs = conns[1]->releaseRecv();
      k++;
    }
  });
  conns[0].reset();
  reader.join();
  EXPECT_TRUE(rs.isOk()) << rs.message();
}

// The contract the executor relies on: once sendsDrained() is true the
// sender may stop calling the connection and the peer still gets everything.
TEST(SocketTransport, OnceDrainedThePeerNeedsNothingMoreFromUs) {
  const size_t slot = 4 << 20;
  test::ScopedEnv e("FERRY_SOCKET_SLOT_BYTES", std::to_string(slot));
  ThreadComm comm(2);
  auto conns = connectPair(comm);
  ASSERT_TRUE(conns[0] && conns[1]);
  Status rs;
  std::thread reader([&] {
    Waiter w(nullptr, 10000, "reader");
    for (int k = 0; k < 6 && rs.isOk();) {
      RecvPiece p;
      rs = conns[1]->tryRecv(&p);
      if (!rs.isOk()) break;
      if (!p.ready) {
        rs = w.idle();
        continue;
      }
      w.progressed();
      const char* d = static_cast<const char*>(p.data);
      if (p.size != slot || d[0] != 'k' + k || d[slot - 1] != 'k' + k) {
        rs = internalError("piece " + std::to_string(k) + " wrong");
      }
      if (rs.isOk()) rs = conns[1]->releaseRecv();
      k++;
      if (k == 3) usleep(50 * 1000);  // let the sender finish while data is in flight
    }
  });
  Waiter w(nullptr, 10000, "sender");
  for (int k = 0; k < 6;) {
    SendSlot s;
    ASSERT_TRUE(conns[0]->trySend(&s).isOk());
    if (!s.data) {
      ASSERT_TRUE(w.idle().isOk());
      continue;
    }
    memset(s.data, 'k' + k, slot);
    ASSERT_TRUE(conns[0]->commitSend(slot).isOk());
    k++;
  }
  while (!conns[0]->sendsDrained()) ASSERT_TRUE(w.idle().isOk());
  // From here on rank 0 never touches its connection.
  reader.join();
  EXPECT_TRUE(rs.isOk()) << rs.message();
}

TEST(SocketTransport, ConnectTimesOutWhenPeerNeverComes) {
  ThreadComm comm(2);
  comm.ctx[1].timeoutMs = 500;
  int64_t t0 = nowMs();
  auto r = comm.tr[1].connect(comm.ctx[1], 0);  // rank 1 accepts; rank 0 never dials
  EXPECT_EQ(r.status().code(), Code::kTimeout) << r.status().message();
  EXPECT_LT(nowMs() - t0, 2500);
}

// Processes: exchange PeerInfo over the bootstrap, then talk over sockets.
int procExchange(const ncclUniqueId& id, int rank, int n, bool dieEarly) {
  auto b = Bootstrap::create(id, rank, n, nullptr, 30000);
  CHILD_OK(b.status());
  std::vector<PeerInfo> peers(n);
  std::atomic<bool> abortFlag{false};
  CommContext ctx{rank, n, 99, b.value()->secret(), &peers, &abortFlag, 20000};
  SocketTransport tr;
  PeerInfo self;
  self.rank = rank;
  CHILD_OK(tr.setup(ctx, &self));
  peers[rank] = self;
  CHILD_OK(b.value()->allGather(peers.data(), sizeof(PeerInfo)));
  int peer = 1 - rank;
  auto c = tr.connect(ctx, peer);
  CHILD_OK(c.status());
  if (!dieEarly) {
    CHILD_OK(exchange(*c.value(), rank, peer, 200, 512 << 10, 20000));
    CHILD_OK(b.value()->barrier());
    return 0;
  }
  if (rank == 1) {
    CHILD_OK(b.value()->barrier());
    kill(getpid(), SIGKILL);
  }
  CHILD_OK(b.value()->barrier());
  Status st = exchange(*c.value(), rank, peer, 1000, 512 << 10, 20000);
  CHILD_CHECK(st.code() == Code::kRemote, "expected kRemote, got %d: %s",
              static_cast<int>(st.code()), st.message().c_str());
  CHILD_CHECK(st.message().find("socket: connection to rank 1") != std::string::npos, "%s",
              st.message().c_str());
  return 0;
}

TEST(SocketTransportProcs, PiecesBothDirections) {
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  auto codes = test::runProcesses(2, [&](int r) { return procExchange(id, r, 2, false); }, 60000);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

TEST(SocketTransportProcs, PeerDeathIsRemoteError) {
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  auto codes = test::runProcesses(2, [&](int r) { return procExchange(id, r, 2, true); }, 60000);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 128 + SIGKILL);
}

}  // namespace
}  // namespace ferry
