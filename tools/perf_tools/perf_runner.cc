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

#include "tools/demo/bench_report.h"
#include "tools/demo/fork_launch.h"
#include "tools/perf_tools/perf_colls.h"
#include "tools/perf_tools/perf_data.h"
#include "tools/perf_tools/perf_launch.h"
#ifdef FERRY_PERF_MPI
#include "tools/perf_tools/perf_mpi.h"
#endif
#include "tools/perf_tools/perf_options.h"
#include "tools/perf_tools/perf_output.h"
#include "tools/perf_tools/perf_store.h"

namespace ferry::perf {
namespace {

using bench::RankContext;
using bench::Report;

// What the header and JSON show for each rank; gathered over the comm.
struct PeerInfo {
  int32_t pid;
  char host[60];
};

// A rank of the run, whoever started it: the id exchange is the only part
// that differs between launch modes.
struct RankSetup {
  int rank;
  int nranks;
  std::function<bool(ncclUniqueId*)> shareId;  // rank 0's id reaches every rank
};

bool ncclOk(ncclResult_t r, ncclComm_t comm, int rank, const char* what) {
  if (r == ncclSuccess) return true;
  const char* last = ncclGetLastError(comm);
  std::fprintf(stderr, "rank %d: Test NCCL failure %s: '%s' (%s)\n", rank, what,
               ncclGetErrorString(r), last != nullptr ? last : "");
  return false;
}

// Everything one rank needs while sweeping.
struct Rank {
  const PerfOptions& o;
  const CollInfo& c;
  int rank_;
  int n_;
  ncclComm_t comm;
  unsigned char* send;
  unsigned char* recv;
  int rank() const { return rank_; }
  int n() const { return n_; }

  bool barrier() {
    float token = 0;
    return ncclOk(ncclAllReduce(&token, &token, 1, ncclFloat, ncclSum, comm, nullptr), comm, rank(),
                  "ncclAllReduce (barrier)");
  }

  // Rank 0 gets the time combined per -a, the summed wrong count and the
  // number of ranks that saw a wrong value. Over the comm itself, so every
  // launch mode combines the same way; it runs after the timed loop.
  bool combine(double secs, int64_t wrong, double* time, int64_t* sumWrong, int* badRanks) {
    double sums[3] = {secs, wrong > 0 ? static_cast<double>(wrong) : 0.0, wrong > 0 ? 1.0 : 0.0};
    double maxes[2] = {secs, -secs};  // max of -secs is -min
    if (!ncclOk(ncclAllReduce(sums, sums, 3, ncclFloat64, ncclSum, comm, nullptr), comm, rank(),
                "ncclAllReduce (combine)") ||
        !ncclOk(ncclAllReduce(maxes, maxes, 2, ncclFloat64, ncclMax, comm, nullptr), comm,
                rank(), "ncclAllReduce (combine)")) {
      return false;
    }
    *sumWrong = static_cast<int64_t>(sums[1]);
    *badRanks = static_cast<int>(sums[2]);
    const double byMode[] = {secs, sums[0] / n(), -maxes[1], maxes[0]};
    *time = byMode[o.average];
    return true;
  }

  bool iteration(const void* s, void* r, size_t count, int type, int op, int root) {
    if (o.aggIters > 1 && !ncclOk(ncclGroupStart(), comm, rank(), "ncclGroupStart")) return false;
    for (int a = 0; a < o.aggIters; ++a) {
      if (!ncclOk(runColl(c, s, r, count, type, op, root, comm, rank(), n()), comm, rank(),
                  c.testName)) {
        return false;
      }
    }
    if (o.aggIters > 1 && !ncclOk(ncclGroupEnd(), comm, rank(), "ncclGroupEnd")) return false;
    return o.blocking != 1 || barrier();
  }

  // As nccl-tests: once per (type, op, root), -w out-of-place ops at every
  // size from min to max doubling, instead of a warmup per row.
  bool warmup(int type, int op, int root) {
    const size_t elt = typeSize(type);
    for (size_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= 2) {
      size_t count = countFor(c, bytes, elt, n());
      for (int i = 0; i < o.warmup; ++i) {
        if (!iteration(send + o.unalign * elt, recv + o.unalign * elt, count, type, op, root)) {
          return false;
        }
      }
      if (bytes == 0) break;  // doubling zero never reaches max
    }
    return true;
  }

  // One placement of one row; false when a call failed.
  bool measure(size_t sizeIndex, size_t count, int type, int op, int root, bool inPlace,
               bench::Half* half) {
    const size_t elt = typeSize(type);
    Layout l = layoutFor(c, count, n(), rank());
    unsigned char* sb = send + o.unalign * elt;
    unsigned char* rb = recv + o.unalign * elt;
    unsigned char* s = inPlace ? rb + l.inPlaceSendOff * elt : sb;
    unsigned char* r = inPlace ? rb + l.inPlaceRecvOff * elt : rb;
    const int dataOp = c.reduces ? op : kOpNone;
    fillInputs(s, l.sendElems, 0, type, dataOp, n(), rank());
    if (!barrier()) return false;
    // As nccl-tests, each timed iteration moves both buffers on by one op's
    // footprint (wrapping within maxBytes) so small sizes are not timed
    // from a warm cache. Inputs there are stale, which timing does not mind.
    size_t span = std::max({l.sendElems, l.recvElems, l.inPlaceSendOff + l.sendElems,
                            l.inPlaceRecvOff + l.recvElems}) *
                  elt;
    size_t stride = std::max<size_t>((span + 63) / 64 * 64, 64);
    size_t slots = span <= o.maxBytes ? (o.maxBytes - span) / stride + 1 : 1;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) {
      size_t shift = (static_cast<size_t>(i) % slots) * stride;
      if (!iteration(s + shift, r + shift, count, type, op, root)) return false;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                  (static_cast<double>(o.iters) * o.aggIters);
    const bool checked = o.check > 0 && checksRecv(c, rank(), root, inPlace);
    int64_t wrong = checked ? 0 : -1;
    for (int k = 0; k < o.check; ++k) {
      uint64_t seed = 1 + sizeIndex * 1000 + static_cast<uint64_t>(k);
      fillInputs(s, l.sendElems, seed, type, dataOp, n(), rank());
      if (!ncclOk(runColl(c, s, r, count, type, op, root, comm, rank(), n()), comm, rank(),
                  c.testName)) {
        return false;
      }
      if (!checked) continue;
      if (o.corruptForTest && l.recvElems > 0) r[elt - 1] ^= 0x40;  // a high bit of element 0
      wrong += countWrong(c, r, count, type, op, seed, n(), rank(), root);
      if (wrong > 0) break;  // as nccl-tests: stop at the first failing repetition
    }
    double time = 0;
    int64_t sumWrong = 0;
    int badRanks = 0;
    if (!combine(secs, wrong, &time, &sumWrong, &badRanks)) return false;
    const bool anyCheck = o.check > 0 && !(c.coll == Coll::kSendRecv && inPlace);
    *half = bench::makeHalf(0, time, busFactor(c, n()), anyCheck ? sumWrong : -1, badRanks);
    double alg = algBytes(c, count, elt, n());
    half->algbw = time > 0 ? alg / time / 1e9 : 0;
    half->busbw = half->algbw * busFactor(c, n());
    return true;
  }
};

bool endsWithJson(const std::string& f) {
  return f.size() >= 5 && f.compare(f.size() - 5, 5, ".json") == 0;
}

void printHeader(const PerfOptions& o, const CollInfo& c, const std::vector<PeerInfo>& peers) {
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
  if (o.cpuTime) std::printf("# Reporting cputime: on host memory it equals the completion time\n");
  for (const std::string& note : o.notes) std::printf("# Note: %s\n", note.c_str());
  if (!o.jsonFile.empty() && !endsWithJson(o.jsonFile)) {
    std::printf("# Note: -J %s: no .json suffix, so no JSON is written (as nccl-tests)\n",
                o.jsonFile.c_str());
  }
  std::printf("#\n# Using devices\n");
  for (size_t r = 0; r < peers.size(); ++r) {
    std::printf("#  Rank %2zu Group  0 Pid %6d on %10s host memory\n", r, peers[r].pid,
                peers[r].host);
  }
  std::fflush(stdout);
}

void* allocTouched(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64 + 64;
  void* p = std::aligned_alloc(64, bytes);
  if (p != nullptr) std::memset(p, 0, bytes);  // page faults stay out of the timed loop
  return p;
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
            if (!rk.measure(k, count, type, op, root, false, &oop)) return bench::kExitLibrary;
            if (!rk.measure(k, count, type, op, root, true, &ip)) return bench::kExitLibrary;
            if (report == nullptr) continue;
            RowRecord row{sizeColumn(c, count, elt, rk.n()),
                          count,
                          typeName(type),
                          c.reduces                    ? opName(op)
                          : c.coll == Coll::kHypercube ? ""
                                                       : "none",
                          c.rooted ? root : -1,
                          oop,
                          ip};
            report->row(row.size, row.count, row.type.c_str(), row.redop.c_str(), row.root, oop,
                        ip);
            run->rows.push_back(row);
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

// Every rank's pid and host, for the header and the JSON file.
bool gatherPeers(ncclComm_t comm, int rank, int nranks, std::vector<PeerInfo>* peers) {
  PeerInfo mine{};
  mine.pid = static_cast<int32_t>(getpid());
  gethostname(mine.host, sizeof mine.host - 1);
  peers->assign(static_cast<size_t>(nranks), PeerInfo{});
  return ncclOk(ncclAllGather(&mine, peers->data(), sizeof mine, ncclChar, comm, nullptr), comm,
                rank, "ncclAllGather (rank info)");
}

int rankMain(const RankSetup& setup, const PerfOptions& o, const CollInfo& c, RunRecord& run) {
  const int rank = setup.rank;
  // The watchdog must end a run whose rank never joins: exit 4 with -T.
  if (o.hangForTest && rank == setup.nranks - 1) {
    sleep(static_cast<unsigned>(o.timeoutSec) + 30);
    return bench::kExitInternal;
  }
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
  std::vector<PeerInfo> peers;
  if (!gatherPeers(comm, rank, setup.nranks, &peers)) {
    ncclCommAbort(comm);
    return bench::kExitLibrary;
  }
  if (rank == 0) printHeader(o, c, peers);
  Report report(stdout, c.testName);
  if (rank == 0) report.columns(o.cpuTime);

  auto* send = static_cast<unsigned char*>(allocTouched(o.maxBytes + o.unalign * 8));
  auto* recv = static_cast<unsigned char*>(allocTouched(o.maxBytes + o.unalign * 8));
  int code = bench::kExitOk;
  if (send == nullptr || recv == nullptr) {
    std::fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes\n", rank, o.maxBytes);
    code = bench::kExitInternal;
  } else {
    Rank rk{o, c, rank, setup.nranks, comm, send, recv};
    code = sweep(rk, rank == 0 ? &report : nullptr, &run);
  }
  std::free(send);
  std::free(recv);
  if (code == bench::kExitOk && rank == 0) {
    report.footer();
    std::printf("\n");
    if (!writeFiles(o, run, report, peers)) code = bench::kExitInternal;
    if (report.outOfBounds() > 0) code = bench::kExitWrong;
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
