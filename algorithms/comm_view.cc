#include "algorithms/comm_view.h"

#include <algorithm>
#include <map>

#include "algorithms/ring_order.h"

namespace ferry {

const char* levelName(Level l) {
  switch (l) {
    case Level::kSelf: return "self";
    case Level::kIntraHost: return "intra-host";
    case Level::kInterHost: return "inter-host";
  }
  return "?";
}

bool CommView::uniformHosts() const {
  for (const auto& h : hostRanks)
    if (h.size() != hostRanks[0].size()) return false;
  return true;
}

CommView makeView(const std::vector<uint64_t>& hostOf, size_t chunkBytes, bool allLocal) {
  CommView v;
  v.nranks = static_cast<int>(hostOf.size());
  std::map<uint64_t, int> index;  // label -> host number, in order of first appearance
  for (int r = 0; r < v.nranks; ++r) {
    auto [it, fresh] = index.emplace(hostOf[r], static_cast<int>(index.size()));
    if (fresh) v.hostRanks.emplace_back();
    v.hostOf.push_back(it->second);
    v.localRankOf.push_back(static_cast<int>(v.hostRanks[it->second].size()));
    v.hostRanks[it->second].push_back(r);
  }
  v.railOf = v.localRankOf;
  v.nicOf.assign(v.nranks, "");
  v.nRails = 1;
  for (const auto& h : v.hostRanks) v.nRails = std::max(v.nRails, static_cast<int>(h.size()));
  v.chunkBytes = chunkBytes;
  v.allLocal = allLocal && v.hostRanks.size() == 1;
  v.ringOrder = hostContiguousOrder(hostOf);
  v.ringOrder2 = secondRingOrder(v.ringOrder, hostOf);
  return v;
}

}  // namespace ferry
