#include "tools/perf_tools/perf_runner.h"

#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tools/demo/bench_register.h"
#include "tools/demo/bench_report.h"
#include "tools/demo/fork_launch.h"
#include "tools/perf_tools/perf_alltoallv.h"
#include "tools/perf_tools/perf_colls.h"
#include "tools/perf_tools/perf_data.h"
#include "tools/perf_tools/perf_launch.h"
#include "tools/perf_tools/perf_mem.h"
#ifdef FERRY_PERF_MPI
#include "tools/perf_tools/perf_mpi.h"
#endif
#include "tools/perf_tools/perf_options.h"
#include "tools/perf_tools/perf_output.h"
#include "tools/perf_tools/perf_rank.h"
#include "tools/perf_tools/perf_store.h"

namespace ferry::perf {
namespace {

using bench::RankContext;
using bench::Report;

// What the header and JSON show for each rank; gathered over the comm.
struct PeerInfo {
  int32_t pid;
  int32_t device;  // CUDA device, -1 for host memory
  char host[56];
};

// A rank of the run, whoever started it: the id exchange is the only part
// that differs between launch modes.
struct RankSetup {
  int rank;
  int nranks;
  std::function<bool(ncclUniqueId*)> shareId;  // rank 0's id reaches every rank
};

bool endsWithJson(const std::string& f) {
  return f.size() >= 5 && f.compare(f.size() - 5, 5, ".json") == 0;
}

void printHeader(const PerfOptions& o, const CollInfo& c, const std::vector<PeerInfo>& peers,
                 const PerfMem& mem, const std::string& memNote) {
  int version = 0;
  ncclGetVersion(&version);
  std::printf("# ferry perf tools (nccl-tests 2.19 compatible) nccl-headers=%d nccl-library=%d\n",
              NCCL_VERSION_CODE, version);
  std::printf("# Collective test starting: %s\n", c.testName);
  std::printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: ", o.minBytes, o.maxBytes);
  if (o.stepFactor > 1) {
    std::printf("%lld(factor)", static_cast<long long>(o.stepFactor));
  } else {
    std::printf("%zu(bytes)", o.stepBytes);
  }
  std::printf(" warmup iters: %d iters: %d agg iters: %d validation: %d graph: 0 unalign: %d\n",
              o.warmup, o.iters, o.aggIters, o.check, o.unalign);
  if (o.blocking != 0)
    std::printf("# Blocking Enabled: wait for completion and barrier after each collective\n");
  if (o.perIter) {
    std::printf("# Per-Iteration Report: host timing; i_* uses max over process rows");
    if (o.perIterSkip > 0) std::printf("; summary skips first %d iterations", o.perIterSkip);
    std::printf(" \n");
  }
  if (o.cpuTime) std::printf("# Reporting cputime: on host memory it equals the completion time\n");
  if (c.coll == Coll::kAlltoAllv) {
    const AlltoallvPattern& p = alltoallvPattern();
    std::printf("# AlltoAllv: %s pattern, out of place through %s\n",
                p.matrixMode() ? ("matrix " + p.file).c_str() : "generated",
                alltoallvFullGroup()   ? "grouped ncclSend/ncclRecv to and from every peer"
                : haveFerryAlltoallv() ? "ferryAlltoAllv"
                                       : "grouped ncclSend/ncclRecv");
  }
  for (const std::string& note : o.notes) std::printf("# Note: %s\n", note.c_str());
  if (!o.jsonFile.empty() && !endsWithJson(o.jsonFile)) {
    std::printf("# Note: -J %s: no .json suffix, so no JSON is written (as nccl-tests)\n",
                o.jsonFile.c_str());
  }
  std::printf("# Note: %s\n", memNote.c_str());
  std::printf("#\n# Using devices\n");
  for (size_t r = 0; r < peers.size(); ++r) {
    if (peers[r].device >= 0) {
      std::printf("#  Rank %2zu Group  0 Pid %6d on %10s device %2d\n", r, peers[r].pid,
                  peers[r].host, peers[r].device);
    } else {
      std::printf("#  Rank %2zu Group  0 Pid %6d on %10s host memory\n", r, peers[r].pid,
                  peers[r].host);
    }
  }
  std::fflush(stdout);
}

// Rank 0: one finished row to stdout and the run record.
void reportRow(const Rank& rk, size_t count, int type, int op, int root, const bench::Half& oop,
               const bench::Half& ip, const IterReport* iters, Report* report, RunRecord* run) {
  const CollInfo& c = rk.c;
  const size_t elt = typeSize(type);
  if (c.coll == Coll::kAlltoAllv && alltoallvPattern().printSummary) {
    for (const bench::Half* h : {&oop, &ip}) {
      std::fputs(alltoallvSummary(alltoallvPattern(), count, elt, rk.n(), h->timeUs / 1e6).c_str(),
                 stdout);
    }
  }
  RowRecord row{sizeColumn(c, count, elt, rk.n()),
                count,
                typeName(type),
                c.reduces                    ? opName(op)
                : c.coll == Coll::kHypercube ? ""
                                             : "none",
                c.rooted ? root : -1,
                oop,
                ip};
  if (rk.o.perIter) {
    row.outOfPlaceIter = iters[0];
    row.inPlaceIter = iters[1];
  }
  std::string stamp = rk.o.timestamps ? bench::formatTimestamp() : "";
  if (!stamp.empty()) row.timestamp = stamp.substr(stamp.find_first_not_of(' '));
  report->row(row.size, row.count, row.type.c_str(), row.redop.c_str(), row.root, oop, ip, stamp);
  run->rows.push_back(std::move(row));
}

int sweep(Rank& rk, Report* report, RunRecord* run) {
  const PerfOptions& o = rk.o;
  const CollInfo& c = rk.c;
  std::vector<size_t> sizes = perfSizes(o);
  std::vector<int> ops = c.reduces ? o.ops : std::vector<int>{0};
  std::vector<int> roots;
  if (!c.rooted) {
    roots.push_back(0);
  } else if (o.root < 0) {
    for (int r = 0; r < rk.n(); ++r) roots.push_back(r);
  } else {
    roots.push_back(o.root);
  }
  for (int cycle = 0; cycle < o.runCycles; ++cycle) {
    for (int type : o.types) {
      const size_t elt = typeSize(type);
      for (int op : ops) {
        for (int root : roots) {
          if (!rk.warmup(type, op, root)) return bench::kExitLibrary;
          for (size_t k = 0; k < sizes.size(); ++k) {
            size_t count = countFor(c, sizes[k], elt, rk.n());
            bench::Half oop, ip;
            IterReport iters[2];
            if (!rk.measure(k, count, type, op, root, false, &oop, &iters[0]) ||
                !rk.measure(k, count, type, op, root, true, &ip, &iters[1])) {
              return bench::kExitLibrary;
            }
            if (report != nullptr) reportRow(rk, count, type, op, root, oop, ip, iters, report, run);
          }
        }
      }
    }
  }
  return bench::kExitOk;
}

// Rank 0, after the footer: the -J and --csv files. False if one failed.
bool writeFiles(const PerfOptions& o, RunRecord& run, const Report& report,
                const std::vector<PeerInfo>& peers) {
  run.outOfBounds = report.outOfBounds();
  run.avgBusBw = report.avgBusBw();
  run.endTime = nowUtc();
  ncclGetVersion(&run.ncclVersion);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  run.hostname = host;
  for (const PeerInfo& p : peers) run.pids.push_back(p.pid);
  bool ok = true;
  if (endsWithJson(o.jsonFile)) ok = !writeExclusive(o.jsonFile, toJson(o, run)).empty();
  if (!o.csvFile.empty()) ok = !writeExclusive(o.csvFile, toCsv(run)).empty() && ok;
  return ok;
}

// Every rank's pid, host and device, for the header and the JSON file.
bool gatherPeers(Rank& rk, const PerfMem& mem, std::vector<PeerInfo>* peers) {
  PeerInfo mine{};
  mine.pid = static_cast<int32_t>(getpid());
  mine.device = mem.deviceIndex();
  gethostname(mine.host, sizeof mine.host - 1);
  peers->assign(static_cast<size_t>(rk.n()), PeerInfo{});
  return rk.allGather(&mine, peers->data(), sizeof mine);
}

int rankMain(const RankSetup& setup, const PerfOptions& o, const CollInfo& c, RunRecord& run) {
  const int rank = setup.rank;
  // The watchdog must end a run whose rank never joins: exit 4 with -T.
  if (o.hangForTest && rank == setup.nranks - 1) {
    sleep(static_cast<unsigned>(o.timeoutSec) + 30);
    return bench::kExitInternal;
  }
  // The device is chosen before the communicator, which NCCL binds to the
  // current device.
  PerfMem mem;
  std::string memNote;
  mem.requireDevice(o.deviceBuffers);
  if (!mem.init("libcudart.so", o.hostBuffers || hostBuffersFromEnv(), rank, &memNote)) {
    return bench::kExitInternal;
  }
  // -R: buffers from ncclMemAlloc (device memory where a device is used).
  // Its destructor frees them when rankMain returns, after the comm is
  // destroyed or aborted.
  bench::RegisteredBuffers reg(o.localRegister, rank);
  ncclUniqueId id;
  if (rank == 0 && !ncclOk(ncclGetUniqueId(&id), nullptr, rank, "ncclGetUniqueId")) {
    return bench::kExitLibrary;
  }
  if (!setup.shareId(&id)) return bench::kExitInternal;
  ncclComm_t comm = nullptr;
  if (!ncclOk(ncclCommInitRank(&comm, setup.nranks, id, rank), nullptr, rank,
              "ncclCommInitRank")) {
    return bench::kExitLibrary;
  }
  int code = bench::kExitOk;
  {
    Rank rk(o, c, rank, setup.nranks, comm, mem);
    std::vector<PeerInfo> peers;
    if (!gatherPeers(rk, mem, &peers)) {
      ncclCommAbort(comm);
      return bench::kExitLibrary;
    }
    if (rank == 0) printHeader(o, c, peers, mem, memNote);
    Report report(stdout, c.testName);
    if (rank == 0) report.columns(o.cpuTime, o.perIter, o.timestamps);
    if (!rk.allocBuffers(reg)) {
      std::fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes\n", rank, o.maxBytes);
      code = bench::kExitInternal;
    } else if (!reg.registerAll(comm)) {
      code = bench::kExitLibrary;
    } else {
      code = sweep(rk, rank == 0 ? &report : nullptr, &run);
      // Now, while the ranks are in step: windows deregister collectively.
      // After a failure the comm is aborted and the handles are left to it.
      if (code == bench::kExitOk && !reg.deregisterAll(comm)) code = bench::kExitLibrary;
    }
    if (code == bench::kExitOk && rank == 0) {
      report.footer();
      // The CPU-forward bridge's traffic (ferry/device.h): what device
      // buffers cost in copies through host memory.
      if (mem.ferryDevice())
        std::printf("# Staged through host memory (rank 0): %llu bytes\n", mem.stagedBytes(comm));
      std::printf("\n");
      if (!writeFiles(o, run, report, peers)) code = bench::kExitInternal;
      if (report.outOfBounds() > 0) code = bench::kExitWrong;
    }
  }
  if (code == bench::kExitLibrary || code == bench::kExitInternal) {
    ncclCommAbort(comm);
  } else if (!ncclOk(ncclCommDestroy(comm), comm, rank, "ncclCommDestroy")) {
    code = bench::kExitLibrary;
  }
  return code;
}


// Rank-count limits known only once the launch mode is; "" when fine.
std::string rankCountError(const CollInfo& c, const PerfOptions& o, int nranks) {
  if (c.coll == Coll::kHypercube && (nranks & (nranks - 1)) != 0) {
    return "hypercube needs a power-of-two rank count, not " + std::to_string(nranks) + " ranks";
  }
  if (o.root >= nranks) {
    return "root (-r) must be below the rank count (" + std::to_string(nranks) + ")";
  }
  return "";
}

// Outside fork mode no launcher watches the ranks, so -T ends this process.
void startWatchdog(int timeoutSec, int rank) {
  if (timeoutSec <= 0) return;
  std::thread([timeoutSec, rank] {
    std::this_thread::sleep_for(std::chrono::seconds(timeoutSec));
    std::fprintf(stderr, "rank %d: timeout: the run did not finish within -T %d s\n", rank,
                 timeoutSec);
    std::_Exit(bench::kExitTimeout);
  }).detach();
}

// The store deadline: -T when given, else a minute, so a missing rank 0
// fails with a message rather than hanging.
int storeTimeout(const PerfOptions& o) { return o.timeoutSec > 0 ? o.timeoutSec : 60; }

// The store has its own deadline and a precise message; the -T watchdog
// starts once the id is shared, so the two never race to report one failure.
int runEnv(const Launch& l, const PerfOptions& o, const CollInfo& c, RunRecord& run) {
  RankSetup setup{l.rank, l.nranks, [&l, &o](ncclUniqueId* id) {
                    bool ok = l.rank == 0
                                  ? storeServe(l.storeHost, l.storePort, l.nranks - 1, id,
                                               sizeof *id, storeTimeout(o))
                                  : storeFetch(l.storeHost, l.storePort, id, sizeof *id,
                                               storeTimeout(o));
                    if (ok) startWatchdog(o.timeoutSec, l.rank);
                    return ok;
                  }};
  return rankMain(setup, o, c, run);
}

#ifdef FERRY_PERF_MPI
int runMpi(int argc, char** argv, const PerfOptions& o, const CollInfo& c, RunRecord& run) {
  RankSetup setup{0, 1, [](ncclUniqueId* id) { return mpiBcast(id, sizeof *id); }};
  if (!mpiStart(&argc, &argv, &setup.rank, &setup.nranks)) return bench::kExitInternal;
  std::string error = rankCountError(c, o, setup.nranks);
  int code = o.root >= setup.nranks ? bench::kExitUsage : 5;
  if (error.empty() && c.coll == Coll::kAlltoAllv) {
    error = alltoallvRunError(alltoallvPattern(), o.minBytes, o.maxBytes, setup.nranks);
    code = bench::kExitInternal;
  }
  if (!error.empty()) {
    if (setup.rank == 0) std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
  } else {
    startWatchdog(o.timeoutSec, setup.rank);
    code = rankMain(setup, o, c, run);
  }
  mpiStop();
  return code;
}
#endif

}  // namespace

int perfMain(const char* coll, int argc, char** argv) {
  const CollInfo* c = findColl(coll);
  if (c == nullptr) {
    std::fprintf(stderr, "%s: unknown collective '%s'\n", argv[0], coll);
    return bench::kExitInternal;
  }
  PerfOptions o;
  std::string error;
  Launch launch;
  ParseResult pr = parsePerfOptions(argc, argv, &o, &error);
  // Before any library call reads its configuration (ranks inherit it).
  if (pr == ParseResult::kOk && o.deviceBuffers) setenv("FERRY_DEVICE", "testdev", 0);
  // A bad traffic matrix ends the run before any rank starts (exit 1, as
  // nccl-tests' internal error).
  if (pr == ParseResult::kOk && !o.help && c->coll == Coll::kAlltoAllv &&
      !loadAlltoallvPattern(&alltoallvPattern(), &error)) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
    return bench::kExitInternal;
  }
  if (pr == ParseResult::kOk && !o.help &&
      !detectLaunch(o.nranks, o.storeHost, o.storePort, &launch, &error)) {
    pr = launch.unavailable ? ParseResult::kNotImplemented : ParseResult::kUsage;
  }
  if (pr == ParseResult::kOk && !o.help && launch.mode != LaunchMode::kMpi) {
    error = rankCountError(*c, o, launch.nranks);
    if (!error.empty()) {
      pr = o.root >= launch.nranks ? ParseResult::kUsage : ParseResult::kNotImplemented;
    }
  }
  if (pr == ParseResult::kOk && !o.help && launch.mode != LaunchMode::kMpi &&
      c->coll == Coll::kAlltoAllv) {
    error = alltoallvRunError(alltoallvPattern(), o.minBytes, o.maxBytes, launch.nranks);
    if (!error.empty()) {
      std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
      return bench::kExitInternal;
    }
  }
  if (pr != ParseResult::kOk) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
    if (pr == ParseResult::kNotImplemented) return 5;
    std::fputs(perfUsage(argv[0]).c_str(), stderr);
    return bench::kExitUsage;
  }
  if (o.help) {
    std::fputs(perfUsage(argv[0]).c_str(), stdout);
    return bench::kExitOk;
  }
  RunRecord run;
  run.args.assign(argv, argv + argc);
  run.startTime = nowUtc();
#ifdef FERRY_PERF_MPI
  if (launch.mode == LaunchMode::kMpi) return runMpi(argc, argv, o, *c, run);
#endif
  if (launch.mode == LaunchMode::kEnv) return runEnv(launch, o, *c, run);
  return bench::forkLaunch(o.nranks, o.timeoutSec, [&o, c, &run](RankContext& ctx) {
    RankSetup setup{ctx.rank(), ctx.nranks(), [&ctx](ncclUniqueId* id) {
                      return ctx.rank() == 0 ? ctx.publish(id, sizeof *id)
                                             : ctx.receive(id, sizeof *id);
                    }};
    return rankMain(setup, o, *c, run);
  });
}

}  // namespace ferry::perf
