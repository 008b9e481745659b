// ferry_allreduce_demo: N forked ranks run float-sum AllReduce over a size
// sweep through the public NCCL API only, check every result exactly and
// print nccl-tests-style rows. No MPI: rank 0 makes the ncclUniqueId and
// hands it over through the launcher's shared region.
//
// Buffers are host memory and the stream is NULL; Ferry completes a
// collective on host buffers before the call returns, so no stream sync.
// -R 1/2 take the two sweep buffers from ncclMemAlloc and register them
// (bench_register.h).

#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "tools/demo/bench_nccl.h"
#include "tools/demo/bench_options.h"
#include "tools/demo/bench_register.h"
#include "tools/demo/bench_report.h"
#include "tools/demo/bench_sweep.h"
#include "tools/demo/fork_launch.h"

namespace ferry::bench {
namespace {

class FerryBackend : public SweepBackend {
 public:
  FerryBackend(RankContext& ctx, ncclComm_t comm, int localRegister)
      : ctx_(ctx), comm_(comm), reg_(localRegister, ctx.rank()) {}

  bool allReduce(const float* send, float* recv, size_t count) override {
    return ncclOk(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm_, nullptr), comm_,
                  ctx_.rank(), "ncclAllReduce");
  }

  bool barrier() override {
    token_ = 0;  // in place, so reset: repeated sums would grow without bound
    return ncclOk(ncclAllReduce(&token_, &token_, 1, ncclFloat, ncclSum, comm_, nullptr), comm_,
                  ctx_.rank(), "ncclAllReduce (barrier)");
  }

  bool combine(double seconds, int64_t wrong, double* maxSeconds, int64_t* sumWrong,
               int* badRanks) override {
    return ctx_.combine(seconds, wrong, maxSeconds, sumWrong, badRanks);
  }

  int allocBuffers(size_t count, float** send, float** recv) override {
    if (reg_.mode() == kRegisterNone) return SweepBackend::allocBuffers(count, send, recv);
    *send = static_cast<float*>(reg_.alloc(count * sizeof(float)));
    *recv = static_cast<float*>(reg_.alloc(count * sizeof(float)));
    if (*send == nullptr || *recv == nullptr) return kExitInternal;
    return reg_.registerAll(comm_) ? kExitOk : kExitLibrary;
  }

  // The memory itself goes in reg_'s destructor, after the comm is gone.
  bool freeBuffers(float* send, float* recv, bool healthy) override {
    if (reg_.mode() == kRegisterNone) return SweepBackend::freeBuffers(send, recv, healthy);
    return !healthy || reg_.deregisterAll(comm_);
  }

 private:
  RankContext& ctx_;
  ncclComm_t comm_;
  RegisteredBuffers reg_;
  float token_ = 0;
};

void printHeader(Report& report, const Options& o, RankContext& ctx) {
  int version = 0;
  ncclGetVersion(&version);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  report.header("ferry_allreduce_demo nccl-headers=" + std::to_string(NCCL_VERSION_CODE) +
                    " nccl-library=" + std::to_string(version),
                o, ctx.nranks(), "max over ranks of each rank's mean per op");
  report.comment("Using host memory, NULL stream, one process per rank (fork)");
  for (int r = 0; r < ctx.nranks(); ++r) {
    char line[320];
    std::snprintf(line, sizeof line, " Rank %2d Pid %6d on %10s host memory", r,
                  ctx.slot(r).pid.load(), host);
    report.comment(line);
  }
  report.columns();
}

int rankMain(RankContext& ctx, const Options& o) {
  const int rank = ctx.rank();
  ncclUniqueId id;
  if (rank == 0) {
    if (!ncclOk(ncclGetUniqueId(&id), nullptr, rank, "ncclGetUniqueId")) return kExitLibrary;
    if (!ctx.publish(&id, sizeof id)) return kExitInternal;
  } else if (!ctx.receive(&id, sizeof id)) {
    return kExitInternal;
  }
  ncclComm_t comm = nullptr;
  if (!ncclOk(ncclCommInitRank(&comm, ctx.nranks(), id, rank), nullptr, rank,
              "ncclCommInitRank")) {
    return kExitLibrary;
  }
  // All pids are in the region once everyone has initialised.
  if (!ctx.barrier()) return kExitInternal;
  Report report(stdout, "all_reduce_perf");
  if (rank == 0) printHeader(report, o, ctx);

  // Its -R buffers are freed when it goes out of scope, after the comm's
  // destroy or abort below.
  FerryBackend backend(ctx, comm, o.localRegister);
  int code = runAllReduceSweep(o, rank, ctx.nranks(), backend, rank == 0 ? &report : nullptr);
  if (code == kExitLibrary || code == kExitInternal) {
    ncclCommAbort(comm);
  } else if (!ncclOk(ncclCommDestroy(comm), comm, rank, "ncclCommDestroy")) {
    code = kExitLibrary;
  }
  return code;
}

}  // namespace
}  // namespace ferry::bench

int main(int argc, char** argv) {
  using namespace ferry::bench;
  Options o;
  if (int code = parseOrExit(argc, argv, &o); code >= 0) return code;
  return forkLaunch(o.nranks, o.timeoutSec, [&o](RankContext& ctx) { return rankMain(ctx, o); });
}
