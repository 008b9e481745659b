#include "tools/perf_tools/perf_iter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tools/demo/bench_report.h"

namespace ferry::perf {
namespace {

size_t percentileIndex(size_t n, size_t pct) {
  return std::min(n - 1, (n * pct + 99) / 100 - 1);
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string list(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + num(v[i]);
  return out + "]";
}

}  // namespace

IterStats computeIterStats(std::vector<double> samples) {
  IterStats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.minUs = samples.front();
  s.maxUs = samples.back();
  s.p50Us = samples[n / 2];
  s.p95Us = samples[percentileIndex(n, 95)];
  s.p99Us = samples[percentileIndex(n, 99)];
  double sum = 0;
  for (double v : samples) sum += v;
  s.avgUs = sum / static_cast<double>(n);
  double var = 0;
  for (double v : samples) var += (v - s.avgUs) * (v - s.avgUs);
  s.stdevUs = std::sqrt(var / static_cast<double>(n));
  s.cvPct = s.avgUs > 0 ? s.stdevUs / s.avgUs * 100.0 : 0.0;
  return s;
}

IterReport makeIterReport(std::vector<std::vector<double>> perRankUs, int skip) {
  IterReport r;
  r.present = true;
  r.skipped = skip;
  const size_t iters = perRankUs.empty() ? 0 : perRankUs.front().size();
  r.timesUs.assign(iters, 0.0);
  for (const auto& rank : perRankUs) {
    for (size_t i = 0; i < iters && i < rank.size(); ++i) {
      r.timesUs[i] = std::max(r.timesUs[i], rank[i]);
    }
  }
  const size_t from = std::min(static_cast<size_t>(skip), iters);
  r.stats = computeIterStats(std::vector<double>(r.timesUs.begin() + from, r.timesUs.end()));
  r.perRankUs = std::move(perRankUs);
  return r;
}

std::string formatIterColumns(const IterStats& s) {
  return "  " + bench::formatTime(s.minUs) + "  " + bench::formatTime(s.maxUs) + "  " +
         bench::formatTime(s.p99Us) + "  " + bench::formatTime(s.cvPct);
}

std::string iterJson(const IterReport& r) {
  std::ostringstream s;
  const IterStats& t = r.stats;
  s << "{\"skipped_iterations\": " << r.skipped << ", \"min_us\": " << num(t.minUs)
    << ", \"max_us\": " << num(t.maxUs) << ", \"avg_us\": " << num(t.avgUs)
    << ", \"p50_us\": " << num(t.p50Us) << ", \"p95_us\": " << num(t.p95Us)
    << ", \"p99_us\": " << num(t.p99Us) << ", \"stdev_us\": " << num(t.stdevUs)
    << ", \"cv_pct\": " << num(t.cvPct) << ", \"times_us\": " << list(r.timesUs);
  if (r.perRankUs.size() > 1) {
    s << ", \"per_process_max_times_us\": [";
    for (size_t k = 0; k < r.perRankUs.size(); ++k) s << (k ? ", " : "") << list(r.perRankUs[k]);
    s << "]";
  }
  s << "}";
  return s.str();
}

}  // namespace ferry::perf
