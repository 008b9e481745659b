#include "algorithms/tree_shape.h"

#include <algorithm>

namespace ferry {

// Node r's lowest set bit b: its parent is r with b cleared and the next bit
// set (xx01 -> xx10, xx11 -> xx10), or with b cleared only when that is out
// of range. Children come from inverting the parents rather than from
// NCCL's down-link loop, so a node whose "upper" child is out of range gets
// the nearest in-range node that names it as parent.
std::vector<int> btreeParents(int n) {
  std::vector<int> parent(std::max(n, 0), -1);
  for (int r = 1; r < n; ++r) {
    int bit = r & -r;
    int up = (r ^ bit) | (bit << 1);
    parent[r] = up < n ? up : r ^ bit;
  }
  return parent;
}

std::vector<int> dtreeParents(int n, int tree) {
  std::vector<int> p0 = btreeParents(n);
  if (tree == 0 || n <= 1) return p0;
  std::vector<int> p1(n, -1);
  for (int r = 0; r < n; ++r) {
    if (n % 2 == 1) {  // shift: rank r plays rank r-1 of tree 0
      int u = p0[(r - 1 + n) % n];
      p1[r] = u < 0 ? -1 : (u + 1) % n;
    } else {  // mirror: rank r plays rank n-1-r of tree 0
      int u = p0[n - 1 - r];
      p1[r] = u < 0 ? -1 : n - 1 - u;
    }
  }
  return p1;
}

RankTree treeFromParents(std::vector<int> parent) {
  RankTree t;
  int n = static_cast<int>(parent.size());
  t.parent = std::move(parent);
  t.children.assign(n, {});
  t.depth.assign(n, -1);
  for (int r = 0; r < n; ++r) {
    if (t.parent[r] < 0) t.root = r;
    else t.children[t.parent[r]].push_back(r);
  }
  // Breadth first from the root: depths, and a check that it spans.
  std::vector<int> queue{t.root};
  t.depth[t.root] = 0;
  for (size_t i = 0; i < queue.size(); ++i)
    for (int c : t.children[queue[i]]) {
      t.depth[c] = t.depth[queue[i]] + 1;
      t.height = std::max(t.height, t.depth[c]);
      queue.push_back(c);
    }
  return t;
}

namespace {

// Tree t's chain through one host, port first (see hostDoubleTree).
std::vector<int> hostChain(const std::vector<int>& ranks, int t) {
  if (t == 0 || ranks.size() < 2) return ranks;
  std::vector<int> chain;
  for (int parity : {1, 0})
    for (size_t i = parity; i < ranks.size(); i += 2) chain.push_back(ranks[i]);
  return chain;
}

}  // namespace

RankTree hostDoubleTree(const CommView& v, int tree) {
  int nh = v.nHosts();
  std::vector<int> hostParent = dtreeParents(nh, tree);
  std::vector<std::vector<int>> chains(nh);
  for (int h = 0; h < nh; ++h) chains[h] = hostChain(v.hostRanks[h], tree);
  std::vector<int> parent(v.nranks, -1);
  for (int h = 0; h < nh; ++h) {
    const std::vector<int>& c = chains[h];
    if (hostParent[h] >= 0) parent[c[0]] = chains[hostParent[h]][0];
    for (size_t i = 1; i < c.size(); ++i) parent[c[i]] = c[i - 1];
  }
  return treeFromParents(std::move(parent));
}

namespace {

// Binomial tree over members (members[0] is its root): member i's parent is
// i without its lowest bit; its children are i + 2^j below that bit, largest
// subtree first. Appends to t's parent and children arrays.
void binomial(const std::vector<int>& members, RankTree* t) {
  int m = static_cast<int>(members.size());
  int top = 1;
  while (top * 2 < m) top *= 2;
  for (int i = 0; i < m; ++i) {
    int low = i == 0 ? 2 * top : (i & -i);
    if (i > 0) t->parent[members[i]] = members[i - low];
    for (int mask = low / 2; mask >= 1; mask /= 2)
      if (i + mask < m) t->children[members[i]].push_back(members[i + mask]);
  }
}

}  // namespace

RankTree binomialTree(const CommView& v, int root) {
  int nh = v.nHosts(), rootHost = v.hostOf[root];
  std::vector<int> leaders;  // host order starting at the root's host
  std::vector<std::vector<int>> members(nh);
  for (int k = 0; k < nh; ++k) {
    int h = (rootHost + k) % nh;
    const std::vector<int>& ranks = v.hostRanks[h];
    int leader = ranks[0];
    for (int r : ranks)
      if (h == rootHost ? r == root : v.railOf[r] == v.railOf[root]) { leader = r; break; }
    leaders.push_back(leader);
    members[h].push_back(leader);
    for (int r : ranks)
      if (r != leader) members[h].push_back(r);
  }
  RankTree t;
  t.parent.assign(v.nranks, -1);
  t.children.assign(v.nranks, {});
  binomial(leaders, &t);  // inter-host children first
  for (int h = 0; h < nh; ++h) binomial(members[h], &t);
  std::vector<std::vector<int>> children = std::move(t.children);
  RankTree out = treeFromParents(std::move(t.parent));
  out.children = std::move(children);  // keep the serving order
  return out;
}

}  // namespace ferry
