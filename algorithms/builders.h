// The built-in algorithms' entry points, one block per algorithms/*.cc file:
// which calls each can run, its schedule and its predicted cost. The
// registry (algorithm.cc) lists them by name; tests call them directly.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/comm_view.h"
#include "algorithms/schedule.h"

namespace ferry {

// ring.cc: AllReduce, ReduceScatter, AllGather, Broadcast, Reduce on the
// view's ring order(s).
bool ringSupports(const CollArgs& a, const CommView& v);
Schedule ringSchedule(const CollArgs& a, const CommView& v);
double ringCost(const CollArgs& a, const CommView& v);

// direct.cc: one hop to every peer: small AllReduce, AlltoAll, Gather, Scatter.
bool directSupports(const CollArgs& a, const CommView& v);
Schedule directSchedule(const CollArgs& a, const CommView& v);
double directCost(const CollArgs& a, const CommView& v);

// direct.cc: AllReduce as a one-hop reduce-scatter then a one-hop
// all-gather, for ranks of one host that read each other's memory.
bool twoShotSupports(const CollArgs& a, const CommView& v);
Schedule twoShotSchedule(const CollArgs& a, const CommView& v);
double twoShotCost(const CollArgs& a, const CommView& v);

// recursive_doubling.cc: AllReduce in log2(n) pairwise exchanges.
bool recursiveDoublingSupports(const CollArgs& a, const CommView& v);
Schedule recursiveDoublingSchedule(const CollArgs& a, const CommView& v);
double recursiveDoublingCost(const CollArgs& a, const CommView& v);

// tree.cc: AllReduce on NCCL's double binary tree (half the elements on
// each tree, reduce up then broadcast down, pipelined by chunks).
bool treeSupports(const CollArgs& a, const CommView& v);
Schedule treeSchedule(const CollArgs& a, const CommView& v);
double treeCost(const CollArgs& a, const CommView& v);

// bintree.cc: Broadcast and Reduce on a rail-aware binomial tree from the
// root (across hosts, then inside each), pipelined by chunks.
bool binomialTreeSupports(const CollArgs& a, const CommView& v);
Schedule binomialTreeSchedule(const CollArgs& a, const CommView& v);
double binomialTreeCost(const CollArgs& a, const CommView& v);
// rabenseifner.cc: AllReduce as a reduce-scatter by recursive halving and
// an all-gather by recursive doubling (near ranks first).
bool rabenseifnerSupports(const CollArgs& a, const CommView& v);
Schedule rabenseifnerSchedule(const CollArgs& a, const CommView& v);
double rabenseifnerCost(const CollArgs& a, const CommView& v);

// bruck.cc: AllGather by Bruck's algorithm and ReduceScatter by its mirror,
// ceil(log2 n) steps for any n.
bool bruckSupports(const CollArgs& a, const CommView& v);
Schedule bruckSchedule(const CollArgs& a, const CommView& v);
double bruckCost(const CollArgs& a, const CommView& v);
// hierarchical.cc: AllReduce, AllGather, ReduceScatter in two levels
// (intra-host rings, inter-host rings per rail) for H >= 2 hosts of L >= 2
// ranks each.
bool hierSupports(const CollArgs& a, const CommView& v);
Schedule hierSchedule(const CollArgs& a, const CommView& v);
double hierCost(const CollArgs& a, const CommView& v);

// rail_alltoall.cc: AlltoAll in two phases, a transpose inside each host and
// one L-block message per remote host on the rank's rail (PXN as a schedule).
bool railSupports(const CollArgs& a, const CommView& v);
Schedule railSchedule(const CollArgs& a, const CommView& v);
double railCost(const CollArgs& a, const CommView& v);
// The remote hosts in the order every rank of host h visits them.
std::vector<int> railRemoteOrder(int h, int H);

// rail_alltoallv.cc: AlltoAllv with per-pair sizes on the same two phases,
// from the entries of the byte matrix a rank knows (its row and column and
// what its local peers send its rail peers: src/comm/alltoallv_call.h).
struct AlltoAllvMatrix {
  int n = 0;
  std::vector<size_t> bytes;             // [src * n + dst]; entries not needed may be 0
  std::vector<size_t> sendOff, recvOff;  // this rank's blocks: byte offsets in input / output
  size_t at(int src, int dst) const { return bytes[static_cast<size_t>(src) * n + dst]; }
};
// The shape rail needs: >= 2 hosts of the same number (>= 2) of ranks.
bool railvSupports(const CommView& v);
Schedule railvSchedule(int rank, const CommView& v, const AlltoAllvMatrix& m);

// pat.cc: AllGather and ReduceScatter in ceil(log2 n) aggregated
// dissemination steps (Bruck), for one rank per host at scale.
bool patSupports(const CollArgs& a, const CommView& v);
Schedule patSchedule(const CollArgs& a, const CommView& v);
double patCost(const CollArgs& a, const CommView& v);

// symmetric.cc: AllReduce, ReduceScatter, AllGather, Broadcast as loads and
// stores on the buffers of every rank of one host (CollArgs::symmetric).
bool symmetricSupports(const CollArgs& a, const CommView& v);
Schedule symmetricSchedule(const CollArgs& a, const CommView& v);
double symmetricCost(const CollArgs& a, const CommView& v);

}  // namespace ferry
