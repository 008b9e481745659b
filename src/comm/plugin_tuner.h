// PluginTuner: an NCCL tuner plugin (plugins/tuner/) as the tuner's
// ExternalTuner (algorithms/tuner.h).
//
// The plugin sees NCCL's cost table [algorithm][protocol]: each Ferry
// candidate NCCL_ALGO allows sits in its registry slot (Algorithm::ncclAlgo,
// ncclProto; several candidates in one slot show the cheapest), every other
// entry is NCCL_ALGO_PROTO_IGNORE. After the plugin's getCollInfo the
// smallest non-negative entry wins and maps back to the cheapest candidate
// in that slot. A plugin that picks an entry with no candidate is an
// "unsupported choice": an error, so Ferry keeps its own with a WARN.
#pragma once

#include <memory>

#include "algorithms/tuner.h"

namespace ferry {

// Null when no tuner plugin is configured or its init failed.
std::unique_ptr<ExternalTuner> openPluginTuner(uint64_t commHash, int nranks, int nHosts);

}  // namespace ferry
