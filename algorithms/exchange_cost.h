// Cost of one step of a schedule in which every rank talks to one partner
// at once (recursive halving/doubling, Bruck): shared by rabenseifner.cc and
// bruck.cc.
//
// The step lasts as long as its slowest pair: if any pair is on two hosts
// it crosses the network. Then every rank of a host whose partner is off the
// host sends at the same time, so they share the host's NICs (a rail each,
// up to CommView::nRails; cost::nics): a host with L such ranks and R rails moves L/R
// times one rank's bytes through each NIC.
#pragma once

#include <algorithm>
#include <vector>

#include "algorithms/comm_view.h"
#include "algorithms/cost_model.h"

namespace ferry::cost {

struct StepLoad {
  const LinkCost* link;  // &v.intra or &v.inter (cost::transfer compares addresses)
  double nicShare;       // bytes through the busiest NIC per byte a rank sends
};

// `partner(r)` for r in [0, ranks): the rank r sends to in this step, or -1.
template <typename Partner>
StepLoad stepLoad(const CommView& v, int ranks, Partner partner) {
  std::vector<int> offHost(v.nHosts(), 0);
  int load = 0;
  for (int r = 0; r < ranks; ++r) {
    int p = partner(r);
    if (p >= 0 && !v.sameHost(r, p)) load = std::max(load, ++offHost[v.hostOf[r]]);
  }
  if (load == 0) return StepLoad{&v.intra, 1.0};
  return StepLoad{&v.inter, load / nics(v, load)};
}

// Start-up of the step, paid once per dependent message: the wait for the
// partner and the handling of one message each way (as recursive doubling's
// round in recursive_doubling.cc).
inline double stepLatency(const CommView& v, const StepLoad& s) { return exchange(v, *s.link); }

// Wire time of `bytes` sent by each rank in the step.
inline double stepTransfer(const CommView& v, const StepLoad& s, double bytes) {
  return transfer(v, *s.link, bytes * s.nicShare);
}

// The whole step: its start (`starts` of them when its bytes go in pieces
// that each wait), then its wire time, less what a token-bucket link saved
// while the step waited (cost::overlap).
inline double stepTime(const CommView& v, const StepLoad& s, double bytes, double starts = 1) {
  return overlap(v, *s.link, starts * stepLatency(v, s), stepTransfer(v, s, bytes));
}

}  // namespace ferry::cost
