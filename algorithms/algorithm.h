// Algorithm registry: the explicit list of schedule builders, by name.
//
// Selection walks the list in order and takes the first algorithm that
// supports the collective and passes the NCCL_ALGO filter. Later issues add
// trees, hierarchical and rail-aware algorithms by adding entries here.
#pragma once

#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "core/status.h"

namespace ferry {

struct Algorithm {
  const char* name;
  bool (*supports)(const CollArgs& a);
  Schedule (*build)(const CollArgs& a);
};

const std::vector<Algorithm>& algorithmRegistry();

// Build the schedule for `a`. `filter` is NCCL_ALGO's value: a comma list of
// names (case-insensitive), a leading ^ excludes; empty = no restriction.
Result<Schedule> selectSchedule(const CollArgs& a, const std::string& filter);

}  // namespace ferry
