// Machine-readable results: the nccl-tests JSON file (-J, format version 3)
// and a CSV file of the rows (--csv, absent upstream). Only rank 0 writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/demo/bench_report.h"
#include "tools/perf_tools/perf_iter.h"
#include "tools/perf_tools/perf_options.h"

namespace ferry::perf {

struct RowRecord {
  size_t size = 0;
  size_t count = 0;
  std::string type, redop;
  int root = -1;
  bench::Half outOfPlace, inPlace;
  IterReport outOfPlaceIter, inPlaceIter;  // -I
  std::string timestamp;                   // -S, "YYYY-MM-DD HH:MM:SS"
};

struct RunRecord {
  std::vector<std::string> args;   // argv
  std::string startTime, endTime;  // "YYYY-MM-DD HH:MM:SS" UTC
  int ncclVersion = 0;
  std::string hostname;
  std::vector<int> pids;  // per rank
  std::vector<RowRecord> rows;
  int64_t outOfBounds = 0;
  double avgBusBw = 0;
};

std::string nowUtc();

// The JSON text (nccl-tests layout; booleans as the strings "true"/"false",
// as upstream writes them; only NCCL_* and FERRY_* environment variables,
// not the whole environment, so no unrelated secrets land in result files).
std::string toJson(const PerfOptions& o, const RunRecord& run);
std::string toCsv(const RunRecord& run);

// Creates path exclusively; if it exists tries path.0, path.1 ... as
// nccl-tests. Returns the name written, or "" after printing why.
std::string writeExclusive(const std::string& path, const std::string& text);

}  // namespace ferry::perf
