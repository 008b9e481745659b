// Direct schedules: AlltoAll, Gather, Scatter and point-to-point batches.
//
// Each peer gets its own send lane and receive lane, so all transfers
// progress at once (no pairwise rounds needed: the executor never blocks on a
// single lane), and the rank's own block is a local copy.
#include <algorithm>
#include <map>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"

namespace ferry {
namespace {

void addLane(Schedule* s, Step st) {
  if (st.bytes > 0) s->lanes.push_back(Lane{{st}});
}

// Small AllReduce in one hop: every rank sends its input to every other and
// folds all inputs in rank order 0, 1, ..., n-1, so every rank computes the
// bit-identical result even for non-associative (floating point) sums.
Schedule directAllReduce(const CollArgs& a) {
  Schedule s{"direct", {}};
  size_t bytes = a.count * a.elemSize;
  Region in{kInputBuf, 0}, out{kOutputBuf, 0};
  if (a.inPlace) {
    // The fold overwrites the output while peers' copies of our input are
    // still being sent: work from a saved copy.
    s.scratchBytes = bytes;
    s.prologue.push_back(copyStep(in, {kScratchBuf, 0}, bytes));
    in = Region{kScratchBuf, 0};
  }
  for (int p = 0; p < a.nranks; ++p) {
    if (p == a.rank) continue;
    Step send = sendStep(p, in, bytes);
    send.scaleSrc = true;
    s.lanes.push_back(Lane{{send}});
  }
  Lane fold;
  for (int p = 0; p < a.nranks; ++p) {
    Step st;
    if (p == 0) {
      st = p == a.rank ? copyStep(in, out, bytes) : recvStep(p, out, bytes);
      st.scaleSrc = p == a.rank;
    } else if (p == a.rank) {
      st = copyStep(in, out, bytes);
      st.kind = StepKind::kLocalReduce;
      st.scaleSrc = true;
    } else {
      st = recvStep(p, out, bytes);
      st.kind = StepKind::kRecvReduceCopy;
      st.src = out;
    }
    st.bytes = bytes;
    fold.steps.push_back(st);
  }
  fold.steps.back().finalValue = true;
  s.lanes.push_back(std::move(fold));
  return s;
}

// Large AllReduce inside one machine: rank r owns slice r of every round; it
// pulls slice r of every peer's input, folds it into its output, then every
// rank pulls every other rank's finished slice. With references (cross-memory
// attach) each byte is read and written about as often as in the physical
// minimum (one reduce pass, one copy pass), and a round needs two waits per
// peer instead of the ring's 2(n-1) hops. One lane: sends of references
// never block, and rounds of at most chunkBytes per slice keep plain copies
// within the FIFOs.
Schedule directReduceScatterGather(const CollArgs& a, size_t chunkBytes) {
  Schedule s{"twoshot", {}};
  Lane lane;
  int n = a.nranks, r = a.rank;
  size_t e = a.elemSize;
  size_t sliceElems = chunkBytes ? std::max<size_t>(1, chunkBytes / e) : a.count;
  size_t roundElems = sliceElems * n;
  for (size_t base = 0; base < a.count; base += roundElems) {
    size_t len = std::min(roundElems, a.count - base);
    auto at = [&](int c) { return base * e + blockStart(len, n, c, e); };
    auto bytes = [&](int c) { return at(c + 1) - at(c); };
    for (int k = 1; k < n; ++k) {
      int p = (r + k) % n;
      Step st = sendStep(p, {kInputBuf, at(p)}, bytes(p));
      st.scaleSrc = true;
      st.sendByValue = true;
      lane.steps.push_back(st);
    }
    for (int k = 1; k < n; ++k) {
      int p = (r + k) % n;
      Step st = recvStep(p, {kOutputBuf, at(r)}, bytes(r));
      st.kind = StepKind::kRecvReduceCopy;
      // The first fold step brings in our own input; later ones accumulate.
      st.src = Region{k == 1 ? kInputBuf : kOutputBuf, at(r)};
      st.scaleSrc = k == 1;
      st.finalValue = k == n - 1;
      lane.steps.push_back(st);
    }
    for (int k = 1; k < n; ++k) lane.steps.push_back(sendStep((r + k) % n, {kOutputBuf, at(r)}, bytes(r)));
    for (int k = 1; k < n; ++k) {
      int p = (r + k) % n;
      lane.steps.push_back(recvStep(p, {kOutputBuf, at(p)}, bytes(p)));
    }
  }
  s.lanes.push_back(std::move(lane));
  return s;
}

}  // namespace

Schedule twoShotSchedule(const CollArgs& a, const CommView& v) {
  if (a.nranks == 1) return Schedule{"twoshot", {singleCopy(a.count * a.elemSize)}};
  return directReduceScatterGather(a, v.chunkBytes);
}

Schedule directSchedule(const CollArgs& a, const CommView&) {
  if (a.kind == CollKind::kAllReduce) {
    if (a.nranks == 1) return Schedule{"direct", {singleCopy(a.count * a.elemSize)}};
    return directAllReduce(a);
  }
  Schedule s{"direct", {}};
  size_t block = a.count * a.elemSize;
  int me = a.rank;
  switch (a.kind) {
    case CollKind::kAllToAll:
      for (int p = 0; p < a.nranks; ++p) {
        if (p == me) {
          if (!a.inPlace) addLane(&s, copyStep({kInputBuf, block * p}, {kOutputBuf, block * p}, block));
          continue;
        }
        addLane(&s, sendStep(p, {kInputBuf, block * p}, block));
        addLane(&s, recvStep(p, {kOutputBuf, block * p}, block));
      }
      break;
    case CollKind::kGather:
      if (me != a.root) {
        Step st = sendStep(a.root, {kInputBuf, 0}, block);
        st.sendByValue = true;  // fan-in: senders copy in parallel
        addLane(&s, st);
        break;
      }
      for (int p = 0; p < a.nranks; ++p) {
        if (p == me) {
          if (!a.inPlace) addLane(&s, copyStep({kInputBuf, 0}, {kOutputBuf, block * p}, block));
        } else {
          addLane(&s, recvStep(p, {kOutputBuf, block * p}, block));
        }
      }
      break;
    case CollKind::kScatter:
      if (me != a.root) {
        addLane(&s, recvStep(a.root, {kOutputBuf, 0}, block));
        break;
      }
      for (int p = 0; p < a.nranks; ++p) {
        if (p == me) {
          if (!a.inPlace) addLane(&s, copyStep({kInputBuf, block * p}, {kOutputBuf, 0}, block));
        } else {
          addLane(&s, sendStep(p, {kInputBuf, block * p}, block));
        }
      }
      break;
    default:
      break;
  }
  return s;
}

Schedule p2pSchedule(int rank, const std::vector<P2pOp>& ops) {
  // One lane per (peer, direction), operations in issue order: the matching
  // peer sees its receives in the same order NCCL promises.
  std::map<std::pair<int, bool>, Lane> lanes;
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2pOp& op = ops[i];
    if (op.bytes == 0) continue;
    Region r{static_cast<uint32_t>(i), 0};
    // A send to ourselves goes through the loopback connection like any other.
    Step st = op.isSend ? sendStep(op.peer, r, op.bytes) : recvStep(op.peer, r, op.bytes);
    lanes[{op.peer, op.isSend}].steps.push_back(st);
  }
  Schedule s{"p2p", {}};
  for (auto& [key, lane] : lanes) s.lanes.push_back(std::move(lane));
  return s;
}

}  // namespace ferry

namespace ferry {

bool directSupports(const CollArgs& a, const CommView&) {
  return a.kind == CollKind::kAllReduce || a.kind == CollKind::kAllToAll ||
         a.kind == CollKind::kGather || a.kind == CollKind::kScatter;
}

// A rank receives every other rank's whole input: one wait, then n-1
// messages through its links (a host's NICs carry what all its ranks send
// off the host) and n-1 reductions. The wait is for every peer at once: when
// f ranks share a core, the last peer posts only after the others of its
// core ran, about min(n-1, f) wake-ups later (4 ranks on 2 cores: 8-byte
// direct took 6.7 us, twice recursive doubling's two rounds).
double directCost(const CollArgs& a, const CommView& v) {
  int n = a.nranks;
  double bytes = static_cast<double>(a.count * a.elemSize);
  if (n == 1) return cost::transfer(v, v.self, bytes);
  int local = 0;  // the busiest host's ranks: its NICs and CPUs bound the time
  for (const auto& h : v.hostRanks) local = std::max(local, static_cast<int>(h.size()));
  double intra = cost::transfer(v, v.intra, (local - 1) * bytes);
  double nics = cost::nics(v, local);
  double inter = cost::transfer(v, v.inter, local * double(n - local) * bytes / nics);
  // A rank handles 2(n-1) messages one after another (n-1 out, n-1 in).
  double perMessage = 2 * ((local - 1) * cost::overhead(v, v.intra) + (n - local) * cost::overhead(v, v.inter));
  double waves = std::min<double>(n - 1, std::ceil(cost::share(v)));
  double wait = perMessage + waves * cost::latency(v, v.slowest());
  double moves = std::max(wait + intra, cost::overlap(v, v.inter, wait, inter));
  switch (a.kind) {
    case CollKind::kAllReduce: return moves + cost::reduce(v, (n - 1) * bytes);
    default: return moves;  // AlltoAll (rail competes on several hosts), Gather, Scatter
  }
}

bool twoShotSupports(const CollArgs& a, const CommView& v) {
  return a.kind == CollKind::kAllReduce && v.allLocal;
}

// Two one-hop phases per round of n chunks: each rank reduces its slice of
// everyone's input, then fetches everyone's finished slice.
double twoShotCost(const CollArgs& a, const CommView& v) {
  int n = a.nranks;
  double bytes = static_cast<double>(a.count * a.elemSize);
  if (n == 1) return cost::transfer(v, v.self, bytes);
  double f = (n - 1.0) / n;
  double rounds = cost::chunks(v, bytes / n);
  return 2 * rounds * cost::latency(v, v.intra) + 4 * (n - 1) * rounds * cost::overhead(v, v.intra) +
         cost::transfer(v, v.intra, 2 * f * bytes) + cost::reduce(v, f * bytes);
}

}  // namespace ferry
