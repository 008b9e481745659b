// RepeatCalls: the last few standalone collective calls of a communicator,
// so a call repeated with the same arguments (a training step's, a
// benchmark's) skips argument checks, task building and the plan lookup.
//
// A call is the same when every argument is: kind, buffers, count, type, op
// and root. Only calls whose outcome depends on nothing else are kept:
// built-in reduction ops (a PreMulSum op may be destroyed and its number
// reused), no symmetric windows on the communicator (a window registered
// later would change the schedule for some ranks only). An in-place
// AlltoAll works on a copy of its input, taken per call from the
// communicator's staging pool (mem/staging.h), whose block is free again
// once the call returns: entries holding their copies made the pool map a
// fresh shared block for every call of several alternating in-place calls
// (a benchmark's rotating buffers: 0.4-1.9 ms per 64-256 KiB call against
// 5-20 us out of place).
// An entry dies with its plan (PlanCache::Ref).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "exec/executor.h"
#include "exec/op_check.h"
#include "exec/plan_cache.h"

namespace ferry {

struct CallKey {
  const void* sendbuff = nullptr;
  const void* recvbuff = nullptr;
  size_t count = 0;
  int32_t kind = -1;
  int32_t type = 0;
  int32_t op = 0;
  int32_t root = 0;
  bool operator==(const CallKey&) const = default;
};

struct RepeatEntry {
  CallKey key;
  PlanCache::Ref plan;
  ReduceSpec reduce;
  OpInfo info;  // collSeq stamped per call
  const char* name = nullptr;
  size_t sendCopyBytes = 0;  // in-place AlltoAll: the input runs from a copy this large
};

// The last Send/Recv group of a communicator (without collectives): the
// same operations on the same buffers reuse its executor, skipping the op
// list, the overlap check and the plan lookup. A group whose sends overlap
// its receives (in place) sends from a copy taken per call from the
// staging pool, as an in-place AlltoAll does.
struct P2pKey {
  const void* buf = nullptr;
  size_t bytes = 0;
  int peer = -1;
  bool isSend = false;
  bool operator==(const P2pKey&) const = default;
};

struct P2pRepeat {
  std::vector<P2pKey> ops;
  PlanCache::Ref plan;
  uint64_t binds = 0;  // the executor's binds() once our buffers were bound
  bool sendsFromCopy = false;  // in place: the sends' bytes go from a copy, back to back
};

class RepeatCalls {
 public:
  static constexpr size_t kEntries = 4;
  // The entry of an earlier call with these arguments, or null.
  const RepeatEntry* find(const CallKey& k) const {
    for (const RepeatEntry& e : entries_)
      if (e.key == k) return &e;
    return nullptr;
  }
  void remember(const RepeatEntry& e);
  P2pRepeat& lastP2p() { return p2p_; }

 private:
  RepeatEntry entries_[kEntries];
  size_t next_ = 0;  // replaced round-robin
  P2pRepeat p2p_;
};

}  // namespace ferry
