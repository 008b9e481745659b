// nccl-tests-shaped output: header, one row per size with an out-of-place and
// an in-place half, and the "Out of bounds" / "Avg bus bandwidth" footer that
// health-check scripts parse. Column widths match nccl-tests' util.cu.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "tools/demo/bench_options.h"

namespace ferry::bench {

// busbw / algbw for AllReduce: each element crosses 2(n-1) of n links.
double allReduceBusFactor(int nranks);

// One half of a row. wrong < 0 means "not checked" (printed N/A).
struct Half {
  double timeUs = 0;
  double algbw = 0;  // GB/s, 1e9 bytes/s
  double busbw = 0;
  int64_t wrong = -1;
  int badRanks = 0;  // ranks that saw at least one wrong element
  std::string extra;  // printed right after the half (the -I columns), "" for none
};

// Builds a Half from a per-op time; algbw = bytes / time.
Half makeHalf(size_t bytes, double seconds, double busFactor, int64_t wrong, int badRanks);

// "%7.2f" while it fits, then fewer decimals, then exponent form; always 7 wide.
// With smallDecimals > 2 (FERRY_PERF_TIME_DECIMALS, 3..6; perf/compare sets
// it), times below 100 us get that many decimals instead: two decimals of a
// microsecond quantise an 8 B time (0.06 or 0.07 us) to ~15%. The row may
// then be wider; its columns stay whitespace-separated.
std::string formatTime(double us, int smallDecimals);
std::string formatTime(double us);  // with timeDecimals()
int timeDecimals();                 // FERRY_PERF_TIME_DECIMALS, 2 when unset or out of range
std::string formatRowPrefix(size_t bytes, size_t count, const char* type, const char* redop,
                            int root);
std::string formatHalf(const Half& h);
// The -S column: " " padding and the local time, 21 wide, as nccl-tests.
std::string formatTimestamp();

class Report {
 public:
  Report(FILE* out, const char* testName) : out_(out), testName_(testName) {}

  // toolLine: first line after "# ", e.g. the library version. timing: how
  // the time column was formed (printed so results are self-describing).
  void header(const std::string& toolLine, const Options& o, int nranks, const char* timing);
  // A "#"-prefixed free-form line (rank/pid list, notes), between header()
  // and columns().
  void comment(const std::string& text);
  // The column header; rows follow. cpuTime names the time columns
  // "cputime" (nccl-tests -C); perIter adds i_min i_max i_p99 i_cv% after
  // each half (-I); timestamps adds the 21-wide timestamp column (-S).
  void columns(bool cpuTime = false, bool perIter = false, bool timestamps = false);
  // tail: appended to the row (the -S timestamp), "" for none.
  void row(size_t bytes, size_t count, const char* type, const char* redop, int root,
           const Half& outOfPlace, const Half& inPlace, const std::string& tail = "");
  void footer();

  int64_t outOfBounds() const { return outOfBounds_; }
  double avgBusBw() const { return halves_ ? busSum_ / halves_ : 0.0; }

 private:
  void account(const Half& h);

  FILE* out_;
  const char* testName_;
  int64_t outOfBounds_ = 0;
  double busSum_ = 0;
  int64_t halves_ = 0;
};

}  // namespace ferry::bench
