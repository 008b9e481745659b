// Tuner: which registered algorithm runs a call.
//
// Every algorithm that supports the call is costed on the communicator's
// view (cost_model.h); the cheapest one that NCCL_ALGO allows runs. An
// external tuner (an NCCL tuner plugin, adapted in src/comm/plugin_tuner.cc)
// then sees the table and may pick another candidate; an error, or a pick
// that is not a candidate, keeps Ferry's choice with a WARN. When NCCL_ALGO
// allows no candidate, the cheapest candidate runs (as NCCL falls back to
// what works) with one INFO line per collective kind per process.
#pragma once

#include <string>
#include <vector>

#include "algorithms/algo_filter.h"
#include "algorithms/algorithm.h"

namespace ferry {

struct Candidate {
  const Algorithm* algo = nullptr;
  double us = 0;         // the cost model's prediction
  bool allowed = false;  // NCCL_ALGO lets it run this collective
};

struct Choice {
  const Algorithm* algo = nullptr;
  double predictedUs = 0;
  const char* by = "cost model";  // or "tuner plugin", "fallback"
  std::vector<Candidate> table;   // registry order
};

class ExternalTuner {
 public:
  virtual ~ExternalTuner() = default;
  // The candidate the external tuner prefers, null for "no opinion", or an
  // error (the caller WARNs and keeps its own choice).
  virtual Result<const Algorithm*> pick(const CollArgs& a, const std::vector<Candidate>& table) = 0;
};

Result<Choice> chooseAlgorithm(const CollArgs& a, const CommView& v, const CollFilter& filter,
                               ExternalTuner* external = nullptr);

// "direct 3.1 us, ring 40.2 us, recdbl 2.7 us" (candidates NCCL_ALGO
// excludes are marked with '-'), for the TUNING log.
std::string costTableText(const Choice& c);

// Choose, then build the chosen schedule.
Result<Schedule> selectSchedule(const CollArgs& a, const CommView& v,
                                const CollFilter& filter = CollFilter(),
                                ExternalTuner* external = nullptr);

}  // namespace ferry
