// Command line of the collective benchmark drivers (Ferry demo, MPI baseline,
// roofline). The letters follow nccl-tests (-b -e -f -i -n -w -c -T) so that
// the demo can grow into all_reduce_perf without changing its interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry::bench {

struct Options {
  int nranks = 4;              // --nranks (alias -t); the MPI driver uses its world size
  size_t minBytes = 8;         // -b
  size_t maxBytes = 32 << 20;  // -e
  int64_t stepFactor = 2;      // -f, multiplicative step when > 1
  size_t stepBytes = 1 << 20;  // -i, additive step when -f <= 1
  int iters = 20;              // -n, timed iterations per size
  int warmup = 5;              // -w, untimed iterations per size
  int check = 1;               // -c, checked iterations per size (0 = no check)
  int repeats = 5;             // -r, timed repeats (roofline: median of these)
  int timeoutSec = 900;        // -T, watchdog deadline for the whole run (0 = none)
  int localRegister = 0;       // -R 0/1/2 (bench_register.h); only the Ferry demo registers
  bool help = false;           // -h
};

// Parses "8", "1K", "0.5M", "2G" (binary suffixes, as nccl-tests). Returns
// false on anything else, including an empty string or a negative number.
bool parseSize(const std::string& text, size_t* bytes);

// Parses -R, --local_register: 0, 1 or 2 (see bench_register.h). On anything
// else returns false and sets *error to a reason naming the choices.
bool parseRegisterMode(const std::string& text, int* mode, std::string* error);

// Parses argv into *opts (starting from the values already there, so a driver
// can change the defaults first). On a bad argument returns false and sets
// *error to a one-line reason.
bool parseOptions(int argc, char** argv, Options* opts, std::string* error);

// Usage text listing every option with its current default.
std::string usage(const char* prog, const Options& defaults);

// The common start of a driver's main(): parse argv into *opts; on a bad
// argument print the reason and usage to stderr, on -h print usage. Returns
// -1 to go on, else the exit code to return.
int parseOrExit(int argc, char** argv, Options* opts);

// The sizes of the sweep in bytes, min to max inclusive. Each is rounded down
// to a whole number of elements of eltSize bytes.
std::vector<size_t> sweepSizes(const Options& opts, size_t eltSize);

}  // namespace ferry::bench
