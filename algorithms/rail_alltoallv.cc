// Rail-local AlltoAllv ("rail" with per-pair sizes): the two phases of
// rail_alltoall.cc on the entries of the byte matrix a rank knows: its own
// row and column, and what its local peers send its rail peers (swapped
// over shared memory first: src/comm/alltoallv_call.h).
//
//  1. Transpose inside the host: rank (h, j) hands (h, i) its blocks for
//     local rank i of every remote host, in railRemoteOrder, then its block
//     for (h, i) itself. (h, i) packs the blocks for remote host h' into one
//     scratch slot, in local rank order.
//  2. Rail exchange: (h, i) sends each remote host's slot to (h', i) as one
//     message. The receiver knows every block's size from the matrix; when
//     its displacements put host h's blocks side by side (the usual packed
//     layout with hosts' ranks consecutive) the message lands in place,
//     otherwise in scratch and then copied out.
//
// Empty blocks and messages are skipped, identically on both ends since
// both read the same entries (a pair that disagrees fails the operation
// check, op_check.h, or the count swap's check). Lanes are those of
// rail_alltoall.cc, so the same argument shows nothing waits in a cycle.
#include <cstdint>

#include "algorithms/builders.h"

namespace ferry {
namespace {

struct Shape {
  int me, h, i, H, L;
  const CommView& v;
  int at(int host, int local) const { return v.hostRanks[host][local]; }
};

// Scratch slot per remote host (railRemoteOrder): the blocks of this host's
// ranks for that host's rank i, in local order.
struct Slots {
  std::vector<size_t> base;                 // [k]
  std::vector<std::vector<size_t>> block;   // [k][j]: offset in scratch
  std::vector<size_t> total;                // [k]
  size_t bytes = 0;
};

Slots layoutSlots(const Shape& s, const std::vector<int>& order, const AlltoAllvMatrix& m) {
  Slots sl;
  for (int host : order) {
    sl.base.push_back(sl.bytes);
    std::vector<size_t> offs;
    for (int j = 0; j < s.L; ++j) {
      offs.push_back(sl.bytes);
      sl.bytes += m.at(s.at(s.h, j), s.at(host, s.i));
    }
    sl.block.push_back(std::move(offs));
    sl.total.push_back(sl.bytes - sl.base.back());
  }
  return sl;
}

void maybe(std::vector<Step>* steps, const Step& st) {
  if (st.bytes > 0) steps->push_back(st);
}

// Phase 2 at the receiver: host g's message into place, or into scratch
// (appended to the schedule's scratch) and copied out block by block.
Lane receiveFromHost(const Shape& s, int g, const AlltoAllvMatrix& m, Schedule* out) {
  Lane lane;
  size_t total = 0, first = SIZE_MAX, next = 0;
  bool inPlace = true;
  for (int j = 0; j < s.L; ++j) {
    int src = s.at(g, j);
    size_t b = m.at(src, s.me);
    if (b == 0) continue;
    if (first == SIZE_MAX) first = next = m.recvOff[src];
    inPlace = inPlace && m.recvOff[src] == next;
    next = m.recvOff[src] + b;
    total += b;
  }
  if (total == 0) return lane;
  int from = s.at(g, s.i);
  if (inPlace) {
    lane.steps.push_back(recvStep(from, {kOutputBuf, first}, total));
    return lane;
  }
  size_t base = out->scratchBytes;
  out->scratchBytes += total;
  lane.steps.push_back(recvStep(from, {kScratchBuf, base}, total));
  for (int j = 0; j < s.L; ++j) {
    int src = s.at(g, j);
    size_t b = m.at(src, s.me);
    maybe(&lane.steps, copyStep({kScratchBuf, base}, {kOutputBuf, m.recvOff[src]}, b));
    base += b;
  }
  return lane;
}

}  // namespace

bool railvSupports(const CommView& v) {
  return v.nHosts() >= 2 && v.uniformHosts() && v.hostRanks[0].size() >= 2;
}

Schedule railvSchedule(int rank, const CommView& v, const AlltoAllvMatrix& m) {
  Schedule out{"rail", {}};
  Shape s{rank, v.hostOf[rank], v.localRankOf[rank], v.nHosts(),
          static_cast<int>(v.hostRanks[0].size()), v};
  auto input = [&](int dst) { return Region{kInputBuf, m.sendOff[dst]}; };
  auto output = [&](int src) { return Region{kOutputBuf, m.recvOff[src]}; };
  std::vector<int> order = railRemoteOrder(s.h, s.H);
  Slots sl = layoutSlots(s, order, m);
  out.scratchBytes = sl.bytes;
  // Our own blocks: for each remote host's rank i into its slot, and ours.
  for (size_t k = 0; k < order.size(); ++k) {
    int dst = s.at(order[k], s.i);
    maybe(&out.prologue, copyStep(input(dst), {kScratchBuf, sl.block[k][s.i]}, m.at(rank, dst)));
  }
  maybe(&out.prologue, copyStep(input(rank), output(rank), m.at(rank, rank)));
  // Phase 1 sends: to local peer j its blocks in `order`, then its own.
  for (int j = 0; j < s.L; ++j) {
    if (j == s.i) continue;
    Lane send;
    int peer = s.at(s.h, j);
    for (int host : order) maybe(&send.steps, sendStep(peer, input(s.at(host, j)), m.at(rank, s.at(host, j))));
    maybe(&send.steps, sendStep(peer, input(peer), m.at(rank, peer)));
    if (!send.steps.empty()) out.lanes.push_back(std::move(send));
  }
  // The rail lane: gather each remote host's slot, send it on; then the
  // local peers' own blocks for us.
  Lane rail;
  for (size_t k = 0; k < order.size(); ++k) {
    int dst = s.at(order[k], s.i);
    for (int j = 0; j < s.L; ++j)
      if (j != s.i) maybe(&rail.steps, recvStep(s.at(s.h, j), {kScratchBuf, sl.block[k][j]}, m.at(s.at(s.h, j), dst)));
    maybe(&rail.steps, sendStep(dst, {kScratchBuf, sl.base[k]}, sl.total[k]));
  }
  for (int j = 0; j < s.L; ++j)
    if (j != s.i) maybe(&rail.steps, recvStep(s.at(s.h, j), output(s.at(s.h, j)), m.at(s.at(s.h, j), rank)));
  if (!rail.steps.empty()) out.lanes.push_back(std::move(rail));
  // Phase 2 receives, one lane per remote host.
  for (int g = 0; g < s.H; ++g) {
    if (g == s.h) continue;
    Lane got = receiveFromHost(s, g, m, &out);
    if (!got.steps.empty()) out.lanes.push_back(std::move(got));
  }
  return out;
}

}  // namespace ferry
