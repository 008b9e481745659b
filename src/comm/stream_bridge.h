// The CPU-forward bridge: collectives on memory the host cannot address,
// ordered on the caller's stream (issue 14, docs/accelerators.md).
//
// One call (or one communicator's share of a group) becomes a job on the
// communicator's OpQueue. At the call, each stream involved gets:
//   copies of the job's device inputs into host staging,
//   a host function that tells the job the stream reached it,
//   a wait until the job is done (the stream waits, not a host thread),
//   copies of the results from staging back into device memory.
// The progress thread takes jobs in call order; once every stream of a job
// reached it, it runs the job's tasks through the group engine on the
// staging buffers (host memory, so every transport and algorithm applies),
// then releases the streams. Staging blocks come from the communicator's
// bridge pool: shared memory, so local peers read them by reference.
//
// Every significant buffer of a stream-ordered task is staged, host memory
// too: its contents count as of when the stream gets there, and in-place
// calls become out-of-place ones on the staging blocks.
#pragma once

#include <vector>

#include "accel/accelerator.h"
#include "comm/group.h"
#include "core/status.h"

namespace ferry {

// The accelerator a call must be ordered on: the owner of any of its
// buffers that is device memory, else the owner of a non-null stream;
// null for plain host work. Two different device kinds in one call are an
// error. Ask only when accel::anyDevice().
Result<accel::Accelerator*> orderingDevice(const void* a, const void* b, accel::StreamHandle s);

// Queue c's tasks as one job (see above). Tasks without `dev` run in it as
// well, stream-ordered like the others on the stream of the first task.
Status bridgeSubmit(Comm* c, std::vector<CollTask> colls, std::vector<P2pTask> p2ps);

}  // namespace ferry
