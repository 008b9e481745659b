// Tree shapes for the tree algorithms (tree.cc, bintree.cc): who is whose
// parent, as pure functions of the CommView, so every rank derives the same
// trees and tests can check them without building schedules.
#pragma once

#include <vector>

#include "algorithms/comm_view.h"

namespace ferry {

// A spanning tree over the ranks of a communicator (or over hosts).
struct RankTree {
  int root = 0;
  std::vector<int> parent;                 // -1 for the root
  std::vector<std::vector<int>> children;  // in the order the builder serves them
  std::vector<int> depth;                  // hops from the root
  int height = 0;                          // largest depth
};

// NCCL's binary tree over n nodes rooted at 0 (ncclGetBtree): the parent
// of every node, -1 for node 0. Leaves and interior nodes alternate, the
// root has one child.
std::vector<int> btreeParents(int n);
// NCCL's double binary tree (ncclGetDtree): tree 0 is btreeParents, tree 1
// is tree 0 shifted by one (odd n) or mirrored (even n), so that for n a
// power of two no node is interior (has children) in both trees.
std::vector<int> dtreeParents(int n, int tree);

// Children lists, depths and height from a parent array.
RankTree treeFromParents(std::vector<int> parent);

// Double tree `tree` (0 or 1) over all ranks: the hosts form
// dtreeParents(nHosts, tree); inside a host the ranks form a chain that
// hangs from the host's port rank, which also talks to the parent and child
// hosts. Tree 0's port is local rank 0 and its chain runs 0, 1, 2, ...;
// tree 1's port is local rank 1 (another rail) and its chain runs odd local
// ranks then even ones, which shares no edge with tree 0's chain once a
// host has 4 ranks.
RankTree hostDoubleTree(const CommView& v, int tree);

// Binomial tree rooted at `root`: first over the hosts, between one leader
// rank per host (the root on its host, elsewhere the rank on the root's
// rail, else local rank 0), then inside each host from its leader. A rank's
// children are listed largest subtree first, inter-host ones first.
RankTree binomialTree(const CommView& v, int root);

}  // namespace ferry
