// Algorithm registry: the explicit list of schedule builders, by name.
//
// Each entry says which calls it can run (supports), how (build: a
// data-independent Schedule) and how long it should take (cost: the model in
// cost_model.h, from the communicator's view). The choice between them lives
// in tuner.h; NCCL_ALGO names entries of this list (algo_filter.h).
#pragma once

#include <string>
#include <vector>

#include "algorithms/comm_view.h"
#include "algorithms/schedule.h"
#include "core/status.h"

namespace ferry {

struct Algorithm {
  const char* name;
  bool (*supports)(const CollArgs& a, const CommView& v);
  Schedule (*build)(const CollArgs& a, const CommView& v);
  // Predicted time of the whole collective in microseconds (cost_model.h).
  double (*cost)(const CollArgs& a, const CommView& v);
  // Where this algorithm sits in NCCL's cost table [algorithm][protocol]
  // (NCCL_ALGO_* / NCCL_PROTO_* of nccl_tuner.h) when a tuner plugin sees
  // it; docs/tuning.md gives the mapping and why.
  int ncclAlgo;
  int ncclProto;
};

const std::vector<Algorithm>& algorithmRegistry();
// The entry named `name` (case-insensitive), or null.
const Algorithm* findAlgorithm(const std::string& name);

}  // namespace ferry
