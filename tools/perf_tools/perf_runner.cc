#include "tools/perf_tools/perf_runner.h"

#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/demo/bench_report.h"
#include "tools/demo/fork_launch.h"
#include "tools/perf_tools/perf_colls.h"
#include "tools/perf_tools/perf_data.h"
#include "tools/perf_tools/perf_options.h"
#include "tools/perf_tools/perf_output.h"

namespace ferry::perf {
namespace {

using bench::RankContext;
using bench::Report;

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
  RankContext& ctx;
  ncclComm_t comm;
  unsigned char* send;
  unsigned char* recv;
  int rank() const { return ctx.rank(); }
  int n() const { return ctx.nranks(); }

  bool barrier() {
    float token = 0;
    return ncclOk(ncclAllReduce(&token, &token, 1, ncclFloat, ncclSum, comm, nullptr), comm, rank(),
                  "ncclAllReduce (barrier)");
  }

  // Rank 0 gets the time combined per -a, the summed wrong count and the
  // number of ranks that saw a wrong value. Through the launcher's region:
  // post, meet, rank 0 reads, meet again so no slot is overwritten early.
  bool combine(double secs, int64_t wrong, double* time, int64_t* sumWrong, int* badRanks) {
    bench::RankSlot& mine = ctx.slot(rank());
    mine.value = secs;
    mine.wrong = wrong;
    if (!ctx.barrier()) return false;
    if (rank() == 0) {
      double sum = 0, lo = secs, hi = secs;
      *sumWrong = 0;
      *badRanks = 0;
      for (int r = 0; r < n(); ++r) {
        const bench::RankSlot& s = ctx.slot(r);
        sum += s.value;
        lo = std::min(lo, s.value);
        hi = std::max(hi, s.value);
        if (s.wrong > 0) {
          *sumWrong += s.wrong;
          *badRanks += 1;
        }
      }
      const double byMode[] = {secs, sum / n(), lo, hi};
      *time = byMode[o.average];
    }
    return ctx.barrier();
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

void printHeader(const PerfOptions& o, const CollInfo& c, RankContext& ctx) {
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
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  for (int r = 0; r < ctx.nranks(); ++r) {
    std::printf("#  Rank %2d Group  0 Pid %6d on %10s host memory\n", r, ctx.slot(r).pid.load(),
                host);
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
bool writeFiles(const PerfOptions& o, RunRecord& run, const Report& report, RankContext& ctx) {
  run.outOfBounds = report.outOfBounds();
  run.avgBusBw = report.avgBusBw();
  run.endTime = nowUtc();
  ncclGetVersion(&run.ncclVersion);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  run.hostname = host;
  for (int r = 0; r < ctx.nranks(); ++r) run.pids.push_back(ctx.slot(r).pid.load());
  bool ok = true;
  if (endsWithJson(o.jsonFile)) ok = !writeExclusive(o.jsonFile, toJson(o, run)).empty();
  if (!o.csvFile.empty()) ok = !writeExclusive(o.csvFile, toCsv(run)).empty() && ok;
  return ok;
}

int rankMain(RankContext& ctx, const PerfOptions& o, const CollInfo& c, RunRecord& run) {
  const int rank = ctx.rank();
  // The watchdog must end a run whose rank never joins: exit 4 with -T.
  if (o.hangForTest && rank == ctx.nranks() - 1) {
    sleep(static_cast<unsigned>(o.timeoutSec) + 30);
    return bench::kExitInternal;
  }
  ncclUniqueId id;
  if (rank == 0) {
    if (!ncclOk(ncclGetUniqueId(&id), nullptr, rank, "ncclGetUniqueId")) return bench::kExitLibrary;
    if (!ctx.publish(&id, sizeof id)) return bench::kExitInternal;
  } else if (!ctx.receive(&id, sizeof id)) {
    return bench::kExitInternal;
  }
  ncclComm_t comm = nullptr;
  if (!ncclOk(ncclCommInitRank(&comm, ctx.nranks(), id, rank), nullptr, rank, "ncclCommInitRank")) {
    return bench::kExitLibrary;
  }
  if (!ctx.barrier()) return bench::kExitInternal;  // every pid is published now
  if (rank == 0) printHeader(o, c, ctx);
  Report report(stdout, c.testName);
  if (rank == 0) report.columns(o.cpuTime);

  auto* send = static_cast<unsigned char*>(allocTouched(o.maxBytes + o.unalign * 8));
  auto* recv = static_cast<unsigned char*>(allocTouched(o.maxBytes + o.unalign * 8));
  int code = bench::kExitOk;
  if (send == nullptr || recv == nullptr) {
    std::fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes\n", rank, o.maxBytes);
    code = bench::kExitInternal;
  } else {
    Rank rk{o, c, ctx, comm, send, recv};
    code = sweep(rk, rank == 0 ? &report : nullptr, &run);
  }
  std::free(send);
  std::free(recv);
  if (code == bench::kExitOk && rank == 0) {
    report.footer();
    std::printf("\n");
    if (!writeFiles(o, run, report, ctx)) code = bench::kExitInternal;
    if (report.outOfBounds() > 0) code = bench::kExitWrong;
  }
  if (code == bench::kExitLibrary || code == bench::kExitInternal) {
    ncclCommAbort(comm);
  } else if (!ncclOk(ncclCommDestroy(comm), comm, rank, "ncclCommDestroy")) {
    code = bench::kExitLibrary;
  }
  return code;
}

}  // namespace

int perfMain(const char* coll, int argc, char** argv) {
  const CollInfo* c = findColl(coll);
  if (c == nullptr) {
    std::fprintf(stderr, "%s: unknown collective '%s'\n", argv[0], coll);
    return bench::kExitInternal;
  }
  PerfOptions o;
  std::string error;
  ParseResult pr = parsePerfOptions(argc, argv, &o, &error);
  if (pr == ParseResult::kOk && c->coll == Coll::kHypercube && (o.nranks & (o.nranks - 1)) != 0) {
    error = "hypercube needs a power-of-two rank count, not --nranks " + std::to_string(o.nranks);
    pr = ParseResult::kNotImplemented;
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
  return bench::forkLaunch(o.nranks, o.timeoutSec,
                           [&o, c, &run](RankContext& ctx) { return rankMain(ctx, o, *c, run); });
}

}  // namespace ferry::perf
