// P2pPlan: the executor a group's Send/Recv operations run on, found or
// built, with the group's buffers bound.
//
// The communicator remembers its last Send/Recv group (repeat_call.h): the
// same operations on the same buffers again reuse its executor at once
// (repeatP2p, no lookup). Otherwise the executor comes from the plan cache
// by the operations' shape, or is built. Sends whose bytes overlap the
// group's receives go from a copy (staging.h), taken again on every repeat.
#pragma once

#include <memory>
#include <vector>

#include "comm/comm.h"
#include "comm/group.h"
#include "core/status.h"
#include "exec/executor.h"

namespace ferry {

// The last group's executor if `p2ps` repeats it, with this group's buffers
// bound (in place: the sends' bytes copied first into a block of the
// staging pool held in *sendCopy for as long as the run needs it); else
// null.
Executor* repeatP2p(Comm* c, const std::vector<P2pTask>& p2ps, std::shared_ptr<char[]>* sendCopy);
// The executor for `p2ps` (cached by shape, or built), buffers bound, and
// remembered as the communicator's last group. In-place sends go from a
// copy held in *sendCopy for as long as the run needs it.
Result<Executor*> p2pExecutor(Comm* c, const std::vector<P2pTask>& p2ps,
                              std::shared_ptr<char[]>* sendCopy);
// A Send/Recv run's operation check (no sequence number: not a collective).
OpInfo p2pInfo(const Comm* c);

}  // namespace ferry
