// One rank's side of a perf run: its communicator, buffers (host or device,
// see perf_mem.h), the timed loop of one row half, and the small
// collectives that combine results across ranks.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tools/demo/bench_nccl.h"
#include "tools/demo/bench_register.h"
#include "tools/demo/bench_report.h"
#include "tools/perf_tools/perf_colls.h"
#include "tools/perf_tools/perf_iter.h"
#include "tools/perf_tools/perf_mem.h"
#include "tools/perf_tools/perf_options.h"

namespace ferry::perf {

using bench::ncclOk;

class Rank {
 public:
  Rank(const PerfOptions& o, const CollInfo& c, int rank, int n, ncclComm_t comm, PerfMem& mem)
      : o(o), c(c), rank_(rank), n_(n), comm_(comm), mem_(mem) {}

  int rank() const { return rank_; }
  int n() const { return n_; }
  // The send and receive buffers (maxBytes plus the -u shift each): from
  // reg when it registers (-R on host memory), else from PerfMem.
  bool allocBuffers(bench::RegisteredBuffers& reg);

  // Host values through the communicator, whatever memory the ops use.
  bool allReduce(double* v, size_t count, ncclRedOp_t op);
  bool allGather(const void* mine, void* all, size_t bytes);
  bool barrier();

  // -w warmup ops per (type, op, root) at every size from min to max doubling.
  bool warmup(int type, int op, int root);
  // One placement of one row; iter is filled with -I. False when a call failed.
  bool measure(size_t sizeIndex, size_t count, int type, int op, int root, bool inPlace,
               bench::Half* half, IterReport* iter);

  const PerfOptions& o;
  const CollInfo& c;

 private:
  bool iteration(const void* s, void* r, size_t count, int type, int op, int root);
  bool combine(double secs, int64_t wrong, double* time, int64_t* sumWrong, int* badRanks);
  bool gatherIters(const std::vector<double>& mine, IterReport* out);
  bool check(size_t sizeIndex, unsigned char* s, unsigned char* r, size_t count, int type, int op,
             int root, bool inPlace, int64_t* wrong);
  unsigned char* scratch(size_t bytes);

  int rank_;
  int n_;
  ncclComm_t comm_;
  PerfMem& mem_;
  unsigned char* send_ = nullptr;
  unsigned char* recv_ = nullptr;
  unsigned char* scratch_ = nullptr;
  size_t scratchBytes_ = 0;
};

}  // namespace ferry::perf
