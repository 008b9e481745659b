// The executor's flat path (executor.h, "Small schedules") over in-memory
// connections: every algorithm's schedule of every collective at small
// sizes, run on all ranks of one process in turn, with exact results; with
// the operation check on; and with slots too small for a step, where the
// flat path must hand the run to the general path mid-run and still be exact.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/comm_view.h"
#include "exec/executor.h"

namespace ferry {
namespace {

using Bytes = std::vector<char>;
using Wires = std::map<std::pair<int, int>, std::deque<Bytes>>;

// One rank's connection to one peer: pieces go into wires[{from, to}].
class QueueConnection : public Connection {
 public:
  // depth: pieces the wire holds before a send has to wait (0: no limit).
  QueueConnection(Wires* w, int from, int to, size_t capacity, size_t depth = 0)
      : w_(w), from_(from), to_(to), slot_(capacity), depth_(depth) {}
  Status trySend(SendSlot* s) override {
    if (depth_ > 0 && (*w_)[{from_, to_}].size() >= depth_) {
      *s = SendSlot{};  // no room yet
      return Status::ok();
    }
    s->data = slot_.data();
    s->capacity = slot_.size();
    return Status::ok();
  }
  Status commitSend(size_t bytes) override {
    (*w_)[{from_, to_}].emplace_back(slot_.begin(), slot_.begin() + static_cast<long>(bytes));
    pieces++;
    return Status::ok();
  }
  Status tryRecv(RecvPiece* p) override {
    *p = RecvPiece{};
    std::deque<Bytes>& q = (*w_)[{to_, from_}];
    if (q.empty()) return Status::ok();
    p->ready = true;
    p->data = q.front().data();
    p->size = q.front().size();
    return Status::ok();
  }
  Status releaseRecv() override {
    (*w_)[{to_, from_}].pop_front();
    return Status::ok();
  }
  bool sendsDrained() override { return (*w_)[{from_, to_}].empty(); }
  bool needsPush() const override { return false; }
  std::string describe() const override { return "queue"; }
  int pieces = 0;

 private:
  Wires* w_;
  int from_, to_;
  Bytes slot_;
  size_t depth_;
};

class Peers : public ConnectionSource {
 public:
  Peers(Wires* w, int self, int n, size_t capacity, size_t depth = 0) {
    for (int p = 0; p < n; ++p) conns_.emplace_back(w, self, p, capacity, depth);
  }
  Result<Connection*> connection(int peer) override { return &conns_[peer]; }
  int pieces() const {
    int k = 0;
    for (const QueueConnection& c : conns_) k += c.pieces;
    return k;
  }

 private:
  std::deque<QueueConnection> conns_;
};

// Rank r's input element i (int32, small: every sum is exact).
int32_t val(int r, size_t i) { return static_cast<int32_t>(r * 1000 + i + 1); }

struct Shape {
  size_t in, out;  // elements
};
Shape shapeOf(CollKind k, size_t count, int n) {
  switch (k) {
    case CollKind::kAllGather: case CollKind::kGather: return {count, count * n};
    case CollKind::kReduceScatter: case CollKind::kScatter: return {count * n, count};
    case CollKind::kAllToAll: return {count * n, count * n};
    default: return {count, count};
  }
}

// What rank r's output element i must be (-1: not defined, e.g. a Reduce's
// non-root output).
int64_t expected(CollKind k, int r, int n, int root, size_t count, size_t i) {
  int64_t sum = 0;
  switch (k) {
    case CollKind::kAllReduce:
      for (int p = 0; p < n; ++p) sum += val(p, i);
      return sum;
    case CollKind::kReduce:
      if (r != root) return -1;
      for (int p = 0; p < n; ++p) sum += val(p, i);
      return sum;
    case CollKind::kReduceScatter:
      for (int p = 0; p < n; ++p) sum += val(p, r * count + i);
      return sum;
    case CollKind::kBroadcast: return val(root, i);
    case CollKind::kAllGather: return val(static_cast<int>(i / count), i % count);
    case CollKind::kGather: return r == root ? val(static_cast<int>(i / count), i % count) : -1;
    case CollKind::kScatter: return val(root, r * count + i);
    case CollKind::kAllToAll: return val(static_cast<int>(i / count), r * count + i % count);
    default: return -1;
  }
}

// Progresses every rank's executor in turn until all are done (or 10000
// rounds); false when one fails (`what` names the run in the failure).
bool progressAll(std::vector<std::unique_ptr<Executor>>& ex, const std::string& what) {
  for (int spins = 0; spins < 10000; ++spins) {
    bool all = true;
    for (size_t r = 0; r < ex.size(); ++r) {
      bool moved = false;
      Status st = ex[r]->progress(&moved);
      EXPECT_TRUE(st.isOk()) << what << " rank " << r << ": " << st.message();
      if (!st.isOk()) return false;
      all = all && ex[r]->done();
    }
    if (all) break;
  }
  return true;
}

struct Outcome {
  bool allFlat = true;     // every rank's schedule qualifies
  bool stayedFlat = true;  // and every run stayed on the flat path
  int pieces = 0;
};

// Runs one collective on n ranks with algorithm `algo` (twice, as a cached
// plan runs again) and checks every output element.
Outcome runAll(const Algorithm& algo, CollKind kind, int n, size_t count, size_t capacity, bool check) {
  const int root = n - 1;
  CommView v = makeView(std::vector<uint64_t>(n, 0));
  Shape sh = shapeOf(kind, count, n);
  Wires wires;
  std::vector<std::vector<int32_t>> in(n), out(n);
  std::vector<std::unique_ptr<Peers>> peers;
  std::vector<std::unique_ptr<Executor>> ex;
  Outcome o;
  ReduceSpec red{kernels::DType::kInt32, kernels::Op::kSum};
  for (int r = 0; r < n; ++r) {
    in[r].resize(sh.in);
    for (size_t i = 0; i < sh.in; ++i) in[r][i] = val(r, i);
    out[r].assign(sh.out, -1);
    peers.push_back(std::make_unique<Peers>(&wires, r, n, capacity));
    CollArgs a{kind, r, n, root, count, 4, false};
    ex.push_back(std::make_unique<Executor>(algo.build(a, v), std::vector<void*>{in[r].data(), out[r].data()},
                                            4, red, ExecOptions{}));
    o.allFlat = o.allFlat && ex[r]->flat();
  }
  for (int round = 0; round < 2; ++round) {
    for (int r = 0; r < n; ++r) {
      std::fill(out[r].begin(), out[r].end(), -1);
      OpInfo info{kind, count, root, 2, kOpSum, static_cast<uint64_t>(round + 1), r};
      Status st = ex[r]->start(*peers[r], check ? &info : nullptr);
      EXPECT_TRUE(st.isOk()) << st.message();
    }
    if (!progressAll(ex, algo.name)) return o;
    for (int r = 0; r < n; ++r) {
      o.stayedFlat = o.stayedFlat && ex[r]->ranFlat();
      EXPECT_TRUE(ex[r]->done()) << algo.name << " " << collName(kind) << " rank " << r << " never finished";
      for (size_t i = 0; i < sh.out; ++i) {
        int64_t want = expected(kind, r, n, root, count, i);
        if (want >= 0) {
          EXPECT_EQ(out[r][i], want) << algo.name << " " << collName(kind) << " n=" << n << " count=" << count
                                     << " rank " << r << " element " << i;
        }
      }
    }
  }
  for (const auto& p : peers) o.pieces += p->pieces();
  return o;
}

const CollKind kKinds[] = {CollKind::kAllReduce, CollKind::kBroadcast, CollKind::kReduce,
                           CollKind::kAllGather, CollKind::kReduceScatter, CollKind::kAllToAll,
                           CollKind::kGather, CollKind::kScatter};

// Every (algorithm, collective, ranks, count) the registry supports at small
// sizes, through `capacity`-byte slots.
struct Sweep {
  int runs = 0, stayedFlat = 0;
};
Sweep sweep(size_t capacity, bool check) {
  Sweep w;
  for (const Algorithm& algo : algorithmRegistry()) {
    for (CollKind kind : kKinds) {
      for (int n : {2, 3, 4}) {
        for (size_t count : {size_t{1}, size_t{5}, size_t{40}}) {
          CollArgs a{kind, 0, n, n - 1, count, 4, false};
          if (!algo.supports(a, makeView(std::vector<uint64_t>(n, 0)))) continue;
          Outcome o = runAll(algo, kind, n, count, capacity, check);
          EXPECT_TRUE(o.allFlat) << algo.name << " " << collName(kind) << " n=" << n;
          w.runs++;
          w.stayedFlat += o.stayedFlat;
        }
      }
    }
  }
  return w;
}

TEST(ExecutorFlat, EverySmallScheduleRunsFlatAndExact) {
  Sweep w = sweep(4096, false);
  EXPECT_GT(w.runs, 50);
  EXPECT_EQ(w.stayedFlat, w.runs);
}

TEST(ExecutorFlat, WithTheOperationCheck) {
  Sweep w = sweep(4096, true);
  EXPECT_GT(w.runs, 50);
  EXPECT_EQ(w.stayedFlat, w.runs);
}

// Slots of 48 bytes hold a descriptor and 2 elements: steps of more go to
// the general path mid-run (split pieces), which must finish them exactly.
TEST(ExecutorFlat, SlotsSmallerThanAStepHandOverToTheGeneralPath) {
  Sweep w = sweep(48, true);
  EXPECT_GT(w.runs, 50);
  EXPECT_LT(w.stayedFlat, w.runs / 2);  // most steps carry more than 2 elements
  const Algorithm* ring = findAlgorithm("ring");
  ASSERT_NE(ring, nullptr);
  // 40 elements per rank: the flat run sends whole steps, the handed-over
  // one two elements a piece.
  int whole = runAll(*ring, CollKind::kAllGather, 2, 40, 4096, false).pieces;
  int split = runAll(*ring, CollKind::kAllGather, 2, 40, 48, false).pieces;
  EXPECT_GT(split, whole);
}

// Send/Recv batches (p2pSchedule: one lane per peer and direction, so the
// flat path runs one pass, sending lanes first): every rank sends two
// messages of different sizes to every rank (itself included) and receives
// them, receives listed before sends, twice, with the operation check; with
// 48-byte slots the longer messages hand the run to the general path.
// Returns whether every run stayed flat.
bool sendRecvBatches(size_t capacity, size_t depth = 0) {
  const int n = 3;
  const size_t sizes[] = {40, 8};  // bytes; the first to a peer carries its descriptor
  Wires wires;
  std::vector<std::unique_ptr<Peers>> peers;
  std::vector<std::unique_ptr<Executor>> ex;
  std::vector<std::vector<Bytes>> bufs(n);
  for (int r = 0; r < n; ++r) {
    std::vector<P2pOp> ops;
    for (int p = 0; p < n; ++p)
      for (size_t b : sizes) ops.push_back(P2pOp{false, p, b});
    for (int p = 0; p < n; ++p)
      for (size_t b : sizes) ops.push_back(P2pOp{true, p, b});
    std::vector<void*> ptrs;
    for (const P2pOp& op : ops) {
      bufs[r].emplace_back(op.bytes);
      ptrs.push_back(bufs[r].back().data());
    }
    peers.push_back(std::make_unique<Peers>(&wires, r, n, capacity, depth));
    ex.push_back(std::make_unique<Executor>(p2pSchedule(r, ops), ptrs, 1, ReduceSpec{}, ExecOptions{}));
    EXPECT_TRUE(ex[r]->flat());
  }
  // Op index of (peer, size k): receives first, then sends.
  auto recvAt = [&](int p, int k) { return static_cast<size_t>(p * 2 + k); };
  auto sendAt = [&](int p, int k) { return static_cast<size_t>(n * 2 + p * 2 + k); };
  bool flat = true;
  for (int round = 0; round < 2; ++round) {
    for (int r = 0; r < n; ++r) {
      for (int p = 0; p < n; ++p) {
        for (int k = 0; k < 2; ++k) {
          Bytes& out = bufs[r][sendAt(p, k)];
          for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(r * 31 + p * 7 + k + i + round);
          std::fill(bufs[r][recvAt(p, k)].begin(), bufs[r][recvAt(p, k)].end(), char{-1});
        }
      }
      OpInfo info;
      info.self = r;
      Status st = ex[r]->start(*peers[r], &info);
      EXPECT_TRUE(st.isOk()) << st.message();
    }
    if (!progressAll(ex, "Send/Recv batch")) return false;
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(ex[r]->done()) << "rank " << r << " never finished";
      flat = flat && ex[r]->ranFlat();
      for (int p = 0; p < n; ++p) {
        for (int k = 0; k < 2; ++k) {
          const Bytes& in = bufs[r][recvAt(p, k)];
          for (size_t i = 0; i < in.size(); ++i)
            EXPECT_EQ(in[i], static_cast<char>(p * 31 + r * 7 + k + i + round))
                << "rank " << r << " from " << p << " message " << k << " byte " << i;
        }
      }
    }
  }
  return flat;
}

TEST(ExecutorFlat, SendRecvBatchesRunInOnePassAndExact) {
  EXPECT_TRUE(sendRecvBatches(4096));
  EXPECT_TRUE(sendRecvBatches(4096, 1));  // one piece in flight per direction: sends wait for room
  EXPECT_FALSE(sendRecvBatches(48));  // 40 bytes and a 32-byte descriptor: handed over
}

// A batch that receives from itself, the receive listed first: one pass
// sends before it receives, so a single progress() call finishes it (a pass
// in listed order would find nothing to receive and need a second call).
TEST(ExecutorFlat, OnePassSendsBeforeItReceives) {
  Wires wires;
  Peers self(&wires, 0, 1, 4096);
  Bytes out(8, 'x'), in(8, '.');
  Executor e(p2pSchedule(0, {P2pOp{false, 0, 8}, P2pOp{true, 0, 8}}), {in.data(), out.data()}, 1,
             ReduceSpec{}, ExecOptions{});
  OpInfo info;
  info.self = 0;
  ASSERT_TRUE(e.start(self, &info).isOk());
  bool moved = false;
  ASSERT_TRUE(e.progress(&moved).isOk());
  EXPECT_TRUE(e.done());
  EXPECT_TRUE(e.ranFlat());
  EXPECT_EQ(in, out);
}

// Sizes listed in another order on the two sides (40 then 8 bytes sent, 8
// then 40 received): the descriptors agree (48 bytes each way), so the
// first receive meets a 40-byte piece for an 8-byte step. It must fail as a
// protocol error without writing past the step's buffer.
TEST(ExecutorFlat, APieceLargerThanItsStepFails) {
  Wires wires;
  Peers p0(&wires, 0, 2, 4096), p1(&wires, 1, 2, 4096);
  Bytes a(40, 'a'), b(8, 'b');
  Bytes small(8 + 32, '.'), big(40, '.');  // small: 8 bytes and a 32-byte guard
  Executor sender(p2pSchedule(0, {P2pOp{true, 1, 40}, P2pOp{true, 1, 8}}), {a.data(), b.data()}, 1,
                  ReduceSpec{}, ExecOptions{});
  Executor receiver(p2pSchedule(1, {P2pOp{false, 0, 8}, P2pOp{false, 0, 40}}),
                    {small.data(), big.data()}, 1, ReduceSpec{}, ExecOptions{});
  OpInfo i0, i1;
  i0.self = 0;
  i1.self = 1;
  ASSERT_TRUE(sender.start(p0, &i0).isOk());
  ASSERT_TRUE(receiver.start(p1, &i1).isOk());
  bool moved = false;
  ASSERT_TRUE(sender.progress(&moved).isOk());
  ASSERT_TRUE(sender.done());
  Status st = receiver.progress(&moved);
  EXPECT_EQ(st.code(), Code::kInternal) << st.message();
  EXPECT_NE(st.message().find("protocol error"), std::string::npos) << st.message();
  for (size_t i = 8; i < small.size(); ++i) EXPECT_EQ(small[i], '.') << "byte " << i << " past the step";
}

TEST(ExecutorFlat, LargeStepsTakeTheGeneralPath) {
  const Algorithm* ring = findAlgorithm("ring");
  ASSERT_NE(ring, nullptr);
  CommView v = makeView(std::vector<uint64_t>(2, 0));
  std::vector<int32_t> buf(2048);
  auto make = [&](size_t count) {
    CollArgs a{CollKind::kAllGather, 0, 2, 0, count, 4, false};
    return Executor(ring->build(a, v), {buf.data(), buf.data()}, 4, ReduceSpec{}, ExecOptions{});
  };
  EXPECT_TRUE(make(Executor::kFlatStepBytes / 4).flat());
  EXPECT_FALSE(make(Executor::kFlatStepBytes / 4 + 1).flat());
  ExecOptions tinyRefs;
  tinyRefs.refThreshold = 512;  // small pieces might go by reference: not flat
  CollArgs a{CollKind::kAllGather, 0, 2, 0, 8, 4, false};
  EXPECT_FALSE(Executor(ring->build(a, v), {buf.data(), buf.data()}, 4, ReduceSpec{}, tinyRefs).flat());
  ExecOptions off;
  off.flat = false;  // FERRY_EXEC_FLAT=0
  EXPECT_FALSE(Executor(ring->build(a, v), {buf.data(), buf.data()}, 4, ReduceSpec{}, off).flat());
}

}  // namespace
}  // namespace ferry
