#include "tools/demo/bench_report.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace ferry::bench {

double allReduceBusFactor(int nranks) {
  return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0;
}

Half makeHalf(size_t bytes, double seconds, double busFactor, int64_t wrong, int badRanks) {
  Half h;
  h.timeUs = seconds * 1e6;
  h.algbw = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
  h.busbw = h.algbw * busFactor;
  h.wrong = wrong;
  h.badRanks = badRanks;
  return h;
}

int timeDecimals() {
  static const int d = [] {
    const char* e = std::getenv("FERRY_PERF_TIME_DECIMALS");
    int v = e && *e ? std::atoi(e) : 2;
    return v >= 3 && v <= 6 ? v : 2;
  }();
  return d;
}

std::string formatTime(double us) { return formatTime(us, timeDecimals()); }

std::string formatTime(double us, int smallDecimals) {
  char buf[32];
  if (smallDecimals > 2 && us < 100.0) {
    std::snprintf(buf, sizeof buf, "%7.*f", smallDecimals, us);
  } else if (us < 10000.0) {
    std::snprintf(buf, sizeof buf, "%7.2f", us);
  } else if (us < 100000.0) {
    std::snprintf(buf, sizeof buf, "%7.1f", us);
  } else if (us < 10000000.0) {
    std::snprintf(buf, sizeof buf, "%7.0f", us);
  } else {
    std::snprintf(buf, sizeof buf, "%7.1e", us);
  }
  return buf;
}

std::string formatRowPrefix(size_t bytes, size_t count, const char* type, const char* redop,
                            int root) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%12zu  %12zu  %8s  %6s  %6d", bytes, count, type, redop, root);
  return buf;
}

std::string formatHalf(const Half& h) {
  char buf[96];
  if (h.wrong < 0) {
    std::snprintf(buf, sizeof buf, "  %7s  %6.2f  %6.2f  %6s", formatTime(h.timeUs).c_str(),
                  h.algbw, h.busbw, "N/A");
  } else {
    std::snprintf(buf, sizeof buf, "  %7s  %6.2f  %6.2f  %6g", formatTime(h.timeUs).c_str(),
                  h.algbw, h.busbw, static_cast<double>(h.wrong));
  }
  return buf;
}

void Report::header(const std::string& toolLine, const Options& o, int nranks,
                    const char* timing) {
  std::fprintf(out_, "# %s\n", toolLine.c_str());
  std::fprintf(out_, "# Collective test starting: %s\n", testName_);
  if (o.stepFactor > 1) {
    std::fprintf(out_, "# nRanks %d minBytes %zu maxBytes %zu step: %" PRId64 "(factor)", nranks,
                 o.minBytes, o.maxBytes, o.stepFactor);
  } else {
    std::fprintf(out_, "# nRanks %d minBytes %zu maxBytes %zu step: %zu(bytes)", nranks,
                 o.minBytes, o.maxBytes, o.stepBytes);
  }
  std::fprintf(out_, " warmup iters: %d iters: %d validation: %d\n", o.warmup, o.iters, o.check);
  std::fprintf(out_, "# Time: %s\n", timing);
  std::fflush(out_);
}

namespace {

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// One header line: the five row-prefix columns, then per half the given
// 7/6/6/6-wide fields (plus four 7-wide -I fields), then the -S column.
std::string headerLine(const char* const prefix[5], const char* const half[4],
                       const char* const iter[4], bool perIter, const char* ts) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "# %10s  %12s  %8s  %6s  %6s", prefix[0], prefix[1],
                        prefix[2], prefix[3], prefix[4]);
  for (int h = 0; h < 2; ++h) {
    n += std::snprintf(buf + n, sizeof buf - n, "  %7s  %6s  %6s  %6s", half[0], half[1], half[2],
                       half[3]);
    if (perIter) {
      n += std::snprintf(buf + n, sizeof buf - n, "  %7s  %7s  %7s  %7s", iter[0], iter[1],
                         iter[2], iter[3]);
    }
  }
  if (ts != nullptr) std::snprintf(buf + n, sizeof buf - n, " %19s", ts);
  return rstrip(buf);
}

}  // namespace

std::string formatTimestamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);  // nccl-tests prints local time
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%21s", when);
  return buf;
}

void Report::columns(bool cpuTime, bool perIter, bool timestamps) {
  const char* t = cpuTime ? "cputime" : "time";
  const char* const empty5[5] = {"", "", "", "", ""};
  const char* const names[5] = {"size", "count", "type", "redop", "root"};
  const char* const units[5] = {"(B)", "(elements)", "", "", ""};
  const char* const halfNames[4] = {t, "algbw", "busbw", "#wrong"};
  const char* const halfUnits[4] = {"(us)", "(GB/s)", "(GB/s)", ""};
  const char* const iterNames[4] = {"i_min", "i_max", "i_p99", "i_cv%"};
  const char* const iterUnits[4] = {"(us)", "(us)", "(us)", "(%)"};
  char title[256];
  std::snprintf(title, sizeof title, "# %10s  %12s  %8s  %6s  %6s%s", empty5[0], empty5[1],
                empty5[2], empty5[3], empty5[4],
                perIter ? "              out-of-place (+ per-iteration)"
                          "                                in-place (+ per-iteration)"
                        : "           out-of-place                       in-place");
  std::fprintf(out_, "#\n%s\n%s\n%s\n", title,
               headerLine(names, halfNames, iterNames, perIter, timestamps ? "timestamp" : nullptr)
                   .c_str(),
               headerLine(units, halfUnits, iterUnits, perIter,
                          timestamps ? "%Y-%m-%d %H:%M:%S" : nullptr)
                   .c_str());
  std::fflush(out_);
}

void Report::comment(const std::string& text) {
  std::fprintf(out_, "# %s\n", text.c_str());
  std::fflush(out_);
}

void Report::account(const Half& h) {
  busSum_ += h.busbw;
  halves_ += 1;
  if (h.wrong > 0) outOfBounds_ += h.badRanks > 0 ? h.badRanks : 1;
}

void Report::row(size_t bytes, size_t count, const char* type, const char* redop, int root,
                 const Half& outOfPlace, const Half& inPlace, const std::string& tail) {
  account(outOfPlace);
  account(inPlace);
  std::fprintf(out_, "%s%s%s%s%s%s\n", formatRowPrefix(bytes, count, type, redop, root).c_str(),
               formatHalf(outOfPlace).c_str(), outOfPlace.extra.c_str(),
               formatHalf(inPlace).c_str(), inPlace.extra.c_str(), tail.c_str());
  std::fflush(out_);  // rows appear as they finish, even through a pipe
}

void Report::footer() {
  std::fprintf(out_, "# Out of bounds values : %" PRId64 " %s\n", outOfBounds_,
               outOfBounds_ == 0 ? "OK" : "FAILED");
  std::fprintf(out_, "# Avg bus bandwidth    : %g\n#\n", avgBusBw());
  std::fprintf(out_, "# Collective test concluded: %s\n", testName_);
  std::fflush(out_);
}

}  // namespace ferry::bench
