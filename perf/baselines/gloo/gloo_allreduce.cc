// gloo_allreduce: Gloo's allreduce (float, sum; Debian libgloo-dev) in the
// sizes, data, exact checks, timing and rows of ferry_allreduce_demo and
// mpi_allreduce: the shared loop in tools/demo/bench_sweep.cc drives it.
//   gloo_allreduce --nranks N -b 8 -e 32M ...
// N forked processes (tools/demo/fork_launch.h) meet through a Gloo
// FileStore in a fresh temporary directory and connect a full mesh over
// Gloo's TCP transport on 127.0.0.1. Gloo reports errors by throwing; each
// call is caught here and turned into a failed op (exit 3).

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "tools/demo/bench_options.h"
#include "tools/demo/bench_report.h"
#include "tools/demo/bench_sweep.h"
#include "tools/demo/fork_launch.h"

namespace ferry::bench {
namespace {

class GlooBackend : public SweepBackend {
 public:
  GlooBackend(RankContext& ctx, std::shared_ptr<gloo::Context> gloo, int timeoutSec)
      : ctx_(ctx), gloo_(std::move(gloo)), timeout_(std::chrono::seconds(timeoutSec)) {}

  bool allReduce(const float* send, float* recv, size_t count) override {
    try {
      gloo::AllreduceOptions opts(gloo_);
      // In place when send == recv: Gloo then reduces the output buffer.
      if (send != recv) opts.setInput(const_cast<float*>(send), count);
      opts.setOutput(recv, count);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setTag(tag_++);
      if (timeout_.count() > 0) opts.setTimeout(timeout_);
      gloo::allreduce(opts);
      return true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: gloo::allreduce of %zu floats failed: %s\n", ctx_.rank(),
                   count, e.what());
      return false;
    }
  }

  bool barrier() override {
    try {
      gloo::BarrierOptions opts(gloo_);
      opts.setTag(tag_++);
      gloo::barrier(opts);
      return true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: gloo::barrier failed: %s\n", ctx_.rank(), e.what());
      return false;
    }
  }

  bool combine(double seconds, int64_t wrong, double* maxSeconds, int64_t* sumWrong,
               int* badRanks) override {
    return ctx_.combine(seconds, wrong, maxSeconds, sumWrong, badRanks);
  }

 private:
  RankContext& ctx_;
  std::shared_ptr<gloo::Context> gloo_;
  std::chrono::milliseconds timeout_;
  uint32_t tag_ = 0;
};

std::shared_ptr<gloo::Context> connect(RankContext& ctx, const std::string& dir) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto store = gloo::rendezvous::FileStore(dir);
    auto c = std::make_shared<gloo::rendezvous::Context>(ctx.rank(), ctx.nranks());
    c->connectFullMesh(store, dev);
    return c;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: Gloo rendezvous in %s failed: %s\n", ctx.rank(), dir.c_str(),
                 e.what());
    return nullptr;
  }
}

int rankMain(RankContext& ctx, const Options& o, const std::string& dir) {
  const int rank = ctx.rank();
  std::shared_ptr<gloo::Context> gloo = connect(ctx, dir);
  if (gloo == nullptr) return kExitLibrary;
  ctx.slot(rank).pid.store(static_cast<int32_t>(getpid()));
  if (!ctx.barrier()) return kExitInternal;
  Report report(stdout, "all_reduce_perf (Gloo)");
  if (rank == 0) {
    report.header("gloo_allreduce (gloo::allreduce baseline, TCP on 127.0.0.1, FileStore)", o,
                  ctx.nranks(), "max over ranks of each rank's mean per op");
    for (int r = 0; r < ctx.nranks(); ++r) {
      char line[160];
      std::snprintf(line, sizeof line, " Rank %2d Pid %6d on 127.0.0.1 host memory", r,
                    ctx.slot(r).pid.load());
      report.comment(line);
    }
    report.columns();
  }
  GlooBackend backend(ctx, gloo, o.timeoutSec);
  return runAllReduceSweep(o, rank, ctx.nranks(), backend, rank == 0 ? &report : nullptr);
}

// Removes the rendezvous directory and the key files Gloo left in it.
void removeDir(const std::string& dir) {
  std::string cmd = "rm -rf '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
}

}  // namespace
}  // namespace ferry::bench

int main(int argc, char** argv) {
  using namespace ferry::bench;
  Options o;
  if (int code = parseOrExit(argc, argv, &o); code >= 0) return code;
  char tmpl[] = "/tmp/gloo_allreduce.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return kExitInternal;
  }
  std::string dir = tmpl;
  int code = forkLaunch(o.nranks, o.timeoutSec,
                        [&o, &dir](RankContext& ctx) { return rankMain(ctx, o, dir); });
  removeDir(dir);
  return code;
}
