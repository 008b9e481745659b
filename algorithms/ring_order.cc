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

// next[r] / prev[r] of a ring order.
void neighbours(const std::vector<int>& order, std::vector<int>* next, std::vector<int>* prev) {
  size_t n = order.size();
  next->assign(n, -1);
  prev->assign(n, -1);
  for (size_t p = 0; p < n; ++p) {
    (*next)[order[p]] = order[(p + 1) % n];
    (*prev)[order[p]] = order[(p + n - 1) % n];
  }
}

}  // namespace

std::vector<int> hostContiguousOrder(const std::vector<uint64_t>& hostOf) {
  std::vector<int> order;
  for (uint64_t h : hostsInOrder(hostOf))
    for (size_t r = 0; r < hostOf.size(); ++r)
      if (hostOf[r] == h) order.push_back(static_cast<int>(r));
  return order;
}

std::vector<int> secondRingOrder(const std::vector<int>& first, const std::vector<uint64_t>& hostOf) {
  std::vector<uint64_t> hosts = hostsInOrder(hostOf);
  if (hosts.size() < 2 || hosts.size() == hostOf.size()) return {};
  std::vector<int> order;
  for (uint64_t h : hosts) {
    std::vector<int> local;
    for (int r : first)
      if (hostOf[r] == h) local.push_back(r);
    order.insert(order.end(), local.rbegin(), local.rend());
  }
  std::vector<int> nextA, prevA, nextB, prevB;
  neighbours(first, &nextA, &prevA);
  neighbours(order, &nextB, &prevB);
  for (size_t r = 0; r < hostOf.size(); ++r)
    if (nextA[r] == nextB[r] || prevA[r] == prevB[r]) return {};
  return order;
}

}  // namespace ferry
