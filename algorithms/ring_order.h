// Where ranks sit on the rings, from which host each rank is on.
//
// A multi-host communicator runs one ring per rail (CommView::rings): ring c
// leaves every host from local rank c, whose network device is rail c, so
// the rings' inter-host hops use different NICs and their bandwidth adds
// up. Each ring runs on its own lane, and a (peer, direction) pair may carry
// only one lane: no two rings may share a directed edge (rank a sends to
// rank b in both). Within a host the rings are therefore not rotations of
// one order (those share all but one edge) but arc-disjoint Hamiltonian
// paths of the host's ranks (hostPath below).
#pragma once

#include <cstdint>
#include <vector>

namespace ferry {

// Most rings a view gets (NCCL_MAX_NCHANNELS can only lower it).
constexpr int kMaxRings = 8;

// Ring position -> rank with each host's ranks contiguous (hosts in order of
// their lowest rank, ranks ascending within a host): a ring crosses every
// host boundary once whatever the rank placement.
std::vector<int> hostContiguousOrder(const std::vector<uint64_t>& hostOf);

// Local ranks 0..p-1 in the order ring c visits them on a host of p ranks:
// it ends at local rank c (the rank that sends to the next host). For every
// p, the paths for c = 0..hostPathCapacity(p)-1 use pairwise different
// directed edges, and (p even) start at pairwise different local ranks.
std::vector<int> hostPath(int p, int c);
// How many arc-disjoint paths hostPath gives: p when p is even, p - 1 when
// it is odd (3 ranks cannot hold 3 such paths ending at 0, 1, 2), 1 for p = 1.
int hostPathCapacity(int p);

// The rings of a communicator whose hosts hold `hostRanks` (host -> its
// ranks, hosts in ring order): one host: its ranks in order, one ring;
// several hosts: min(wanted, kMaxRings, every host's capacity) rings (one
// when some host has a single rank), ring c made of each host's hostPath(p,
// c). Always at least one ring; rings never share a directed edge.
std::vector<std::vector<int>> railRings(const std::vector<std::vector<int>>& hostRanks, int wanted);

// Some rank sends to the same peer in both rings (equivalently, receives
// from the same peer in both): the two could not run on separate lanes.
bool ringsShareDirection(const std::vector<int>& a, const std::vector<int>& b);

}  // namespace ferry
