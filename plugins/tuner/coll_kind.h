// Ferry's collective kinds as the tuner ABI names them. Header-only so that
// the tuner module itself does not depend on the algorithms module; the
// caller that asks a tuner (the cost model) includes it.
#pragma once

#include <nccl_tuner.h>

#include <optional>

#include "algorithms/schedule.h"

namespace ferry::tunerplugin {

// nullopt for what NCCL never hands a tuner: a batch of point-to-point
// operations. AlltoAll, Gather and Scatter have ncclFunc_t values but lie
// outside NCCL's tuned range (NCCL_NUM_FUNCTIONS); a plugin may ignore them.
inline std::optional<ncclFunc_t> toNcclFunc(CollKind kind) {
  switch (kind) {
    case CollKind::kAllReduce: return ncclFuncAllReduce;
    case CollKind::kBroadcast: return ncclFuncBroadcast;
    case CollKind::kReduce: return ncclFuncReduce;
    case CollKind::kAllGather: return ncclFuncAllGather;
    case CollKind::kReduceScatter: return ncclFuncReduceScatter;
    case CollKind::kAllToAll: return ncclFuncAlltoAll;
    case CollKind::kGather: return ncclFuncGather;
    case CollKind::kScatter: return ncclFuncScatter;
    case CollKind::kSendRecv: return std::nullopt;
    case CollKind::kAllToAllv: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace ferry::tunerplugin
