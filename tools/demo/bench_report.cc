#include "tools/demo/bench_report.h"

#include <cinttypes>

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

std::string formatTime(double us) {
  char buf[32];
  if (us < 10000.0) {
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

void Report::columns(bool cpuTime) {
  const char* t = cpuTime ? "cputime" : "   time";
  std::fprintf(out_, "#\n");
  std::fprintf(out_,
               "#                                                              out-of-place"
               "                       in-place\n"
               "#       size         count      type   redop    root  %s   algbw   busbw"
               "  #wrong  %s   algbw   busbw  #wrong\n"
               "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
               "             (us)  (GB/s)  (GB/s)\n",
               t, t);
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
                 const Half& outOfPlace, const Half& inPlace) {
  account(outOfPlace);
  account(inPlace);
  std::fprintf(out_, "%s%s%s\n", formatRowPrefix(bytes, count, type, redop, root).c_str(),
               formatHalf(outOfPlace).c_str(), formatHalf(inPlace).c_str());
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
