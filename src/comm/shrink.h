// ncclCommShrink: a child communicator of the parent's ranks minus a list,
// made by the survivors alone (the excluded ranks may be dead).
#pragma once

#include <memory>
#include <vector>

#include "comm/comm.h"

namespace ferry {

// The parent ranks that stay, in order (their child ranks are their index),
// or an error naming what is wrong with the list: empty, a rank out of
// range, or the caller itself excluded.
Result<std::vector<int>> shrinkSurvivors(int nranks, int me, const std::vector<int>& exclude);

// Called by every survivor with the same list. The first survivor starts a
// fresh bootstrap root and sends its id to each other survivor over the
// parent's bootstrap point-to-point channel: no allgather, so no excluded
// rank is ever waited for. `abortFirst` (NCCL_SHRINK_ABORT) first revokes
// the parent: its connections fail, so nothing more travels on them.
Result<std::unique_ptr<Comm>> shrinkComm(Comm* parent, const std::vector<int>& exclude, bool abortFirst,
                                         const CommConfig& cfg);

}  // namespace ferry
