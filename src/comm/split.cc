#include "comm/split.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/log.h"

namespace ferry {

Result<std::unique_ptr<Comm>> splitComm(Comm* parent, int color, int key, const CommConfig& cfg) {
  struct Entry {
    int32_t color, key;
  };
  int n = parent->nranks(), me = parent->rank();
  std::vector<Entry> all(n);
  all[me] = Entry{color, key};
  FERRY_TRY(parent->bootstrap().allGather(all.data(), sizeof(Entry)));

  std::vector<int> members;  // parent ranks of my color, in child order
  if (color != NCCL_SPLIT_NOCOLOR) {
    for (int r = 0; r < n; ++r)
      if (all[r].color == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return all[a].key < all[b].key; });
  }
  bool leader = !members.empty() && members[0] == me;
  std::vector<ncclUniqueId> ids(n);
  std::memset(ids.data(), 0, ids.size() * sizeof(ncclUniqueId));
  if (leader) FERRY_TRY(createFreshUniqueId(&ids[me]));
  FERRY_TRY(parent->bootstrap().allGather(ids.data(), sizeof(ncclUniqueId)));
  if (members.empty()) return std::unique_ptr<Comm>();

  int newRank = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  auto child = std::make_unique<Comm>(newRank, static_cast<int>(members.size()), cfg);
  FERRY_INFO(log::kInit, "ncclCommSplit: rank %d color %d key %d -> rank %d of %zu", me, color, key,
             newRank, members.size());
  FERRY_TRY(child->init(ids[members[0]]));
  return child;
}

}  // namespace ferry
