#include "algorithms/ring_order.h"

#include <algorithm>

namespace ferry {
namespace {

std::vector<uint64_t> hostsInOrder(const std::vector<uint64_t>& hostOf) {
  std::vector<uint64_t> hosts;
  for (uint64_t h : hostOf)
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  return hosts;
}

// Walecki's zigzag on q (even) vertices: P_j = j, j+1, j-1, j+2, j-2, ...,
// j+q/2 (mod q), for j < q/2. Its q-1 edges {u, v} all have u + v = 2j or
// 2j+1 (mod q), and K_q has exactly q-1 edges with those sums ((q-2)/2 with
// the even sum, q/2 with the odd one), so P_j is that sum class and
// P_0..P_{q/2-1} split K_q's edges between them. Read forwards and backwards
// they are q arc-disjoint directed paths (a path and its reverse use
// opposite arcs), ending at j + q/2 and at j: every vertex is the end of
// exactly one of them (and the start of exactly one).
std::vector<int> zigzag(int q, int j) {
  std::vector<int> p{j};
  for (int k = 1; k <= q / 2; ++k) {
    p.push_back((j + k) % q);
    if (k < q / 2) p.push_back(((j - k) % q + q) % q);
  }
  return p;
}

// The directed path on 0..q-1 (q even) that ends at c.
std::vector<int> zigzagEndingAt(int q, int c) {
  if (c >= q / 2) return zigzag(q, c - q / 2);
  std::vector<int> p = zigzag(q, c);
  std::reverse(p.begin(), p.end());
  return p;
}

}  // namespace

std::vector<int> hostContiguousOrder(const std::vector<uint64_t>& hostOf) {
  std::vector<int> order;
  for (uint64_t h : hostsInOrder(hostOf))
    for (size_t r = 0; r < hostOf.size(); ++r)
      if (hostOf[r] == h) order.push_back(static_cast<int>(r));
  return order;
}

int hostPathCapacity(int p) { return p <= 1 ? 1 : p % 2 == 0 ? p : p - 1; }

// Odd p: the zigzag paths of the first p - 1 ranks, each preceded by the
// last rank x. The arcs x -> start are distinct because the starts are, and
// no zigzag arc touches x: the paths stay arc-disjoint (every ring then
// enters the host at x).
std::vector<int> hostPath(int p, int c) {
  if (p <= 1) return {0};
  if (p % 2 == 0) return zigzagEndingAt(p, c);
  std::vector<int> path{p - 1};
  for (int v : zigzagEndingAt(p - 1, c)) path.push_back(v);
  return path;
}

bool ringsShareDirection(const std::vector<int>& a, const std::vector<int>& b) {
  size_t n = a.size();
  std::vector<int> nextA(n, -1);
  for (size_t p = 0; p < n; ++p) nextA[a[p]] = a[(p + 1) % n];
  for (size_t p = 0; p < b.size(); ++p)
    if (nextA[b[p]] == b[(p + 1) % b.size()]) return true;
  return false;
}

// Between hosts, ring c goes from local rank c of one host to the first
// rank of the next: those sources differ between rings, so the inter-host
// edges differ too, and within a host hostPath keeps edges apart. The final
// check only guards the construction (drop rings, as NCCL_MAX_NCHANNELS would).
std::vector<std::vector<int>> railRings(const std::vector<std::vector<int>>& hostRanks, int wanted) {
  if (hostRanks.size() <= 1) return {hostRanks.empty() ? std::vector<int>{} : hostRanks[0]};
  int n = std::clamp(wanted, 1, kMaxRings);
  for (const auto& h : hostRanks) n = std::min(n, hostPathCapacity(static_cast<int>(h.size())));
  std::vector<std::vector<int>> rings(n);
  for (int c = 0; c < n; ++c)
    for (const auto& h : hostRanks)
      for (int l : hostPath(static_cast<int>(h.size()), c)) rings[c].push_back(h[l]);
  auto collides = [&](size_t k) {
    for (size_t j = 0; j < k; ++j)
      if (ringsShareDirection(rings[j], rings[k])) return true;
    return false;
  };
  for (size_t k = 1; k < rings.size(); ++k)
    if (collides(k)) rings.resize(k);
  return rings;
}

}  // namespace ferry
