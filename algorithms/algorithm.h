// Algorithm registry: the explicit list of schedule builders, by name.
//
// Selection walks the list in order and takes the first algorithm that
// supports the collective and passes the NCCL_ALGO filter (algo_filter.h). Later issues add
// trees, hierarchical and rail-aware algorithms by adding entries here.
#pragma once

#include <string>
#include <vector>

#include "algorithms/algo_filter.h"
#include "algorithms/schedule.h"
#include "core/status.h"

namespace ferry {

struct Algorithm {
  const char* name;
  bool (*supports)(const CollArgs& a);
  Schedule (*build)(const CollArgs& a);
};

const std::vector<Algorithm>& algorithmRegistry();

// Build the schedule for `a` with the first algorithm that supports it and
// that `filter` (NCCL_ALGO, parsed) allows. When the filter allows none that
// can run `a` (e.g. NCCL_ALGO=Tree, which Ferry lacks, or ^ring for a large
// AllReduce), the first that supports it runs, as NCCL falls back to what
// works, with an INFO line (TUNING) once per collective kind per process.
Result<Schedule> selectSchedule(const CollArgs& a, const CollFilter& filter = CollFilter());

}  // namespace ferry
