#include "comm/shrink.h"

#include <algorithm>
#include <string>

#include "bootstrap/bootstrap.h"
#include "core/log.h"

namespace ferry {
namespace {

// Bootstrap point-to-point tags of shrink ids: one per shrink of a parent,
// above anything else uses (nothing else sends point-to-point today).
constexpr int kShrinkTagBase = 0x5348'0000;  // "SH"

}  // namespace

Result<std::vector<int>> shrinkSurvivors(int nranks, int me, const std::vector<int>& exclude) {
  if (exclude.empty()) return invalidArgument("ncclCommShrink: excludeRanksCount must be > 0");
  std::vector<bool> out(nranks, false);
  for (int r : exclude) {
    if (r < 0 || r >= nranks)
      return invalidArgument("ncclCommShrink: excluded rank " + std::to_string(r) + " is not in 0.." +
                             std::to_string(nranks - 1));
    out[r] = true;
  }
  if (out[me])
    return invalidArgument("ncclCommShrink: rank " + std::to_string(me) +
                           " is in its own exclude list (excluded ranks must not call it)");
  std::vector<int> stay;
  for (int r = 0; r < nranks; ++r)
    if (!out[r]) stay.push_back(r);
  return stay;
}

Result<std::unique_ptr<Comm>> shrinkComm(Comm* parent, const std::vector<int>& exclude, bool abortFirst,
                                         const CommConfig& cfg) {
  FERRY_ASSIGN(std::vector<int> stay, shrinkSurvivors(parent->nranks(), parent->rank(), exclude));
  if (abortFirst) parent->revoke();
  int tag = kShrinkTagBase + parent->nextShrinkSeq();
  int leader = stay[0], me = parent->rank();
  ncclUniqueId id{};
  if (me == leader) {
    FERRY_TRY(createFreshUniqueId(&id));
    for (size_t i = 1; i < stay.size(); ++i) FERRY_TRY(parent->bootstrap().send(stay[i], tag, &id, sizeof(id)));
  } else {
    FERRY_TRY(parent->bootstrap().recv(leader, tag, &id, sizeof(id)));
  }
  int newRank = static_cast<int>(std::find(stay.begin(), stay.end(), me) - stay.begin());
  auto child = std::make_unique<Comm>(newRank, static_cast<int>(stay.size()), cfg);
  FERRY_INFO(log::kInit, "ncclCommShrink: rank %d -> rank %d of %zu (%zu excluded%s)", me, newRank, stay.size(),
             exclude.size(), abortFirst ? ", parent revoked first" : "");
  FERRY_TRY(child->init(id));
  return child;
}

}  // namespace ferry
