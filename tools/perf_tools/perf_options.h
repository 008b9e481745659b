// Command line of the nccl-tests-compatible perf tools (all_reduce_perf ...).
// Letters, long names and defaults follow nccl-tests 2.19; options that only
// make sense on a GPU are accepted and answered with a note, because Ferry's
// collectives run on host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry::perf {

struct PerfOptions {
  int nranks = 1;                  // --nranks: forked ranks (nccl-tests without MPI: 1)
  int nthreads = 1;                // -t, only 1
  int ngpus = 1;                   // -g, only 1
  size_t minBytes = 32 << 20;      // -b
  size_t maxBytes = 32 << 20;      // -e
  int64_t stepFactor = 1;          // -f, multiplicative when > 1
  size_t stepBytes = 1 << 20;      // -i, additive otherwise
  int iters = 20;                  // -n
  int aggIters = 1;                // -m, ops per iteration (grouped when > 1)
  int warmup = 1;                  // -w
  int runCycles = 1;               // -N
  int check = 1;                   // -c, 0 = no check
  std::vector<int> ops;            // -o, ncclRedOp_t values (default {sum})
  std::vector<int> types;          // -d, ncclDataType_t values (default {float})
  int root = 0;                    // -r, -1 = every root
  int blocking = 0;                // -z 0..3
  int unalign = 0;                 // -u: buffers start this many elements past 64-byte alignment
  int average = 1;                 // -a 0 rank0, 1 mean, 2 min, 3 max
  bool cpuTime = false;            // -C
  bool timestamps = false;         // -S: a timestamp column on each row
  bool perIter = false;            // -I: per-iteration host timing columns
  int perIterSkip = 0;             // -K: iterations left out of the -I statistics
  bool cudaGraph = false;          // -G given (noted; only to refuse -I with it)
  bool deviceBuffers = false;      // --device-buffers: device memory or fail (FERRY_DEVICE=testdev if unset)
  bool hostBuffers = false;        // --host-buffers or FERRY_PERF_HOST=1: never cudaMalloc
  int localRegister = 0;           // -R 0/1/2 (tools/demo/bench_register.h), host buffers only
  int timeoutSec = 0;              // -T, 0 = none
  std::string jsonFile;            // -J, written when it ends in ".json" (as nccl-tests)
  std::string csvFile;             // --csv: the rows as CSV
  std::string storeHost;           // --store HOST:PORT: env mode's id store (else MASTER_*)
  int storePort = 0;
  bool help = false;               // -h
  bool hangForTest = false;        // --hang-for-test: the last rank stalls (tests -T)
  bool corruptForTest = false;     // --corrupt-for-test: one wrong element (tests only)
  std::vector<std::string> notes;  // GPU-only options seen, printed as "# " lines
};

// Outcome of parsing: kOk, kUsage (exit 255: malformed or out-of-range value)
// or kNotImplemented (exit 5, as nccl-tests for more GPUs than exist).
enum class ParseResult { kOk, kUsage, kNotImplemented };

ParseResult parsePerfOptions(int argc, char** argv, PerfOptions* o, std::string* error);
std::string perfUsage(const char* prog);

// Sizes of the sweep in bytes (not yet rounded to the collective's counts).
std::vector<size_t> perfSizes(const PerfOptions& o);

// Name tables shared with the runner.
const char* opName(int op);      // "sum" ... "avg"
const char* typeName(int type);  // nccl-tests names: "int8" ... "f8e5m2"

}  // namespace ferry::perf
