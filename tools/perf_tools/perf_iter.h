// -I per-iteration timing on the host: every timed iteration is timed on its
// own, each iteration's time is combined across ranks as the maximum (the
// slowest rank sets the pace of a collective), and the statistics skip the
// first -K iterations. Columns and JSON fields follow nccl-tests.
#pragma once

#include <string>
#include <vector>

namespace ferry::perf {

struct IterStats {
  double minUs = 0, maxUs = 0, avgUs = 0, p50Us = 0, p95Us = 0, p99Us = 0, stdevUs = 0;
  double cvPct = 0;  // stdev / avg, percent
};

// What one half of a row reports with -I.
struct IterReport {
  bool present = false;
  int skipped = 0;                               // -K
  std::vector<double> timesUs;                   // per iteration, max over ranks, all of them
  std::vector<std::vector<double>> perRankUs;    // [rank][iteration]
  IterStats stats;                               // over timesUs after the skipped ones
};

// Statistics of samplesUs (non-empty): sorted-index percentiles as
// nccl-tests (p50 = sorted[n/2]; pXX = sorted[ceil(n*XX/100)-1]),
// population standard deviation.
IterStats computeIterStats(std::vector<double> samplesUs);

// perRankUs[r][i] -> the report: per-iteration max over ranks, stats after
// skipping `skip` iterations (skip < iterations).
IterReport makeIterReport(std::vector<std::vector<double>> perRankUs, int skip);

// "  i_min  i_max  i_p99  i_cv%", each 7 wide, as printed after a half.
std::string formatIterColumns(const IterStats& s);

// {"skipped_iterations": ..., "min_us": ..., ..., "per_process_max_times_us": [[...]]}
// (the last only with more than one rank, as nccl-tests).
std::string iterJson(const IterReport& r);

}  // namespace ferry::perf
