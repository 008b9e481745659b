// Rail-local AlltoAll ("rail"): NCCL's PXN idea as a schedule. H hosts of L
// ranks each; local rank i of every host sits on rail i.
//
//  1. Transpose inside each host: rank (h, j) hands local rank (h, i) every
//     block it has for local rank i of any host (H blocks, over shared
//     memory); (h, i)'s own block comes straight into its output.
//  2. Rail exchange: (h, i) sends remote host h' one message of L blocks,
//     everything host h has for (h', i), in local rank order, which is
//     exactly where (h', i) keeps them when host h's ranks are consecutive.
//
// So every inter-host byte travels on its rail, and a rank sends H-1 network
// messages of L blocks instead of L(H-1) of one: fewer, larger messages (the
// network's per-message cost and latency waves shrink L-fold), at the price
// of one more shared-memory pass over (L-1)/L of the data.
//
// Lanes: one per local peer for phase-1 sends (unconditional); one "rail"
// lane that takes, remote host by remote host, the L-1 blocks of the local
// peers into scratch and then sends the L-block message on (it is the only
// lane receiving from local peers and the only one sending to remote ones,
// so per-connection order is the lane's order, which senders mirror); one
// lane per remote host receiving its message. No lane waits on another
// rank's lane that waits on it: phase-1 sends and phase-2 receives never
// wait for anything.
#include <algorithm>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"

namespace ferry {
namespace {

bool consecutive(const std::vector<int>& ranks) {
  for (size_t j = 1; j < ranks.size(); ++j)
    if (ranks[j] != ranks[j - 1] + 1) return false;
  return true;
}

}  // namespace

// Senders and the rail lane must agree on it; h+1, h+2, ... so that hosts
// do not all hit host 0 first.
std::vector<int> railRemoteOrder(int h, int H) {
  std::vector<int> o;
  for (int k = 1; k < H; ++k) o.push_back((h + k) % H);
  return o;
}

bool railSupports(const CollArgs& a, const CommView& v) {
  return a.kind == CollKind::kAllToAll && railvSupports(v);
}

Schedule railSchedule(const CollArgs& a, const CommView& v) {
  Schedule s{"rail", {}};
  const size_t B = a.count * a.elemSize;
  if (B == 0) return s;
  const int me = a.rank, h = v.hostOf[me], i = v.localRankOf[me];
  const int H = v.nHosts(), L = static_cast<int>(v.hostRanks[0].size());
  const std::vector<int>& mine = v.hostRanks[h];
  auto rankAt = [&](int host, int local) { return v.hostRanks[host][local]; };
  std::vector<int> order = railRemoteOrder(h, H);
  // Our blocks sit side by side in a receiver's output when our ranks are
  // consecutive: then each remote host gets them as one message.
  const bool oneMessage = consecutive(mine);
  // Scratch: one L-block slot per remote host (in `order`), then (in place)
  // a copy of the whole input, which the output overwrites.
  size_t slot = L * B;
  auto slotOf = [&](int k, int j) { return Region{kScratchBuf, k * slot + j * B}; };
  Region in{kInputBuf, 0};
  s.scratchBytes = order.size() * slot;
  if (a.inPlace) {
    in = Region{kScratchBuf, s.scratchBytes};
    s.scratchBytes += B * a.nranks;
    s.prologue.push_back(copyStep({kInputBuf, 0}, in, B * a.nranks));
  }
  auto input = [&](int dest) { return Region{in.buf, in.offset + dest * B}; };
  // Our own block for each remote host's rank i goes into its slot.
  for (size_t k = 0; k < order.size(); ++k) s.prologue.push_back(copyStep(input(rankAt(order[k], i)), slotOf(k, i), B));
  if (!a.inPlace) s.prologue.push_back(copyStep(input(me), {kOutputBuf, me * B}, B));
  // Phase 1 sends: to each local peer j, its blocks in `order`, then its own.
  for (int j = 0; j < L; ++j) {
    if (j == i) continue;
    Lane out;
    for (int host : order) out.steps.push_back(sendStep(mine[j], input(rankAt(host, j)), B));
    out.steps.push_back(sendStep(mine[j], input(mine[j]), B));
    s.lanes.push_back(std::move(out));
  }
  // The rail lane: gather each remote host's message, send it on; then the
  // local peers' blocks for us.
  Lane rail;
  for (size_t k = 0; k < order.size(); ++k) {
    for (int j = 0; j < L; ++j)
      if (j != i) rail.steps.push_back(recvStep(mine[j], slotOf(k, j), B));
    if (oneMessage) {
      rail.steps.push_back(sendStep(rankAt(order[k], i), slotOf(k, 0), slot));
    } else {
      for (int j = 0; j < L; ++j) rail.steps.push_back(sendStep(rankAt(order[k], i), slotOf(k, j), B));
    }
  }
  for (int j = 0; j < L; ++j)
    if (j != i) rail.steps.push_back(recvStep(mine[j], {kOutputBuf, mine[j] * B}, B));
  s.lanes.push_back(std::move(rail));
  // Phase 2 receives: host g's message holds its ranks' blocks in local order.
  for (int g = 0; g < H; ++g) {
    if (g == h) continue;
    const std::vector<int>& theirs = v.hostRanks[g];
    Lane got;
    if (consecutive(theirs)) {
      got.steps.push_back(recvStep(rankAt(g, i), {kOutputBuf, theirs[0] * B}, slot));
    } else {
      for (int j = 0; j < L; ++j) got.steps.push_back(recvStep(rankAt(g, i), {kOutputBuf, theirs[j] * B}, B));
    }
    s.lanes.push_back(std::move(got));
  }
  return s;
}

// Phase 1: H blocks to each of L-1 local peers and L-1 blocks from each per
// remote host; phase 2: H-1 messages of L blocks each way per rank, the
// host's L ranks at once through its NICs. The rail lane gathers one remote
// host's message while the last one is still on the wire, so the wire time
// overlaps the shared-memory phase as direct's overlaps its waits
// (measured on 4 x 4 x 4 rails shaped to 400 Mbit/s: rail 1.15x direct at
// 64 KiB blocks, 1.41x at 1 MiB, where adding the phases predicted 0.9x).
double railCost(const CollArgs& a, const CommView& v) {
  double b = static_cast<double>(a.count * a.elemSize);
  int H = v.nHosts(), L = static_cast<int>(v.hostRanks[0].size());
  double intraMsgs = 2.0 * (L - 1) * H, interMsgs = 2.0 * (H - 1);
  double intra = cost::transfer(v, v.intra, (L - 1) * H * b);
  double inter = cost::transfer(v, v.inter, (H - 1) * double(L) * L * b / cost::nics(v, L));
  double waits = intraMsgs * cost::overhead(v, v.intra) + interMsgs * cost::overhead(v, v.inter) +
                 cost::latency(v, v.intra) + std::min<double>(H - 1, std::ceil(cost::share(v))) * cost::latency(v, v.inter);
  return std::max(waits + intra, cost::overlap(v, v.inter, waits, inter));
}

}  // namespace ferry
