// mpi_coll_perf: Open MPI's collectives (float; sum where they reduce) in the
// sizes, data, exact checks and row format of tools/perf_tools' *_perf
// binaries, so perf/compare can put Ferry and MPI side by side per size.
//   mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np N
//       mpi_coll_perf --coll all_gather [--root R] -b 8 -e 32M ...
// Other options are mpi_allreduce's (tools/demo/bench_options.h).
// Timing, as the shared loop in tools/demo/bench_sweep.cc: 200 ms of untimed
// ops first, then per size and placement: fill, -w ops, MPI_Barrier, -n timed
// back-to-back ops; the row shows the max over ranks of each rank's mean.

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "perf/baselines/mpi_colls.h"
#include "tools/demo/bench_data.h"
#include "tools/demo/bench_options.h"
#include "tools/demo/bench_report.h"
#include "tools/demo/bench_sweep.h"
#include "tools/demo/fork_launch.h"

namespace ferry::bench {
namespace {

struct Run {
  const MpiCollInfo* c;
  int rank, n, root;
  float* send;
  float* recv;
};

bool mpiOk(int rc, int rank, const char* what) {
  if (rc == MPI_SUCCESS) return true;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, text);
  return false;
}

// One op of count elements per rank. In place, the input sits in recv at the
// layout's inPlaceOff and MPI_IN_PLACE (or Sendrecv_replace) is used.
int callColl(const Run& r, size_t count, bool inPlace) {
  const int k = static_cast<int>(count);
  const MPI_Comm w = MPI_COMM_WORLD;
  const MPI_Datatype f = MPI_FLOAT;
  float* recv = r.recv;
  float* mine = recv + count * static_cast<size_t>(r.rank);
  const bool isRoot = r.rank == r.root;
  switch (r.c->coll) {
    case MpiColl::kAllReduce:
      return MPI_Allreduce(inPlace ? MPI_IN_PLACE : r.send, recv, k, f, MPI_SUM, w);
    case MpiColl::kAllGather:
      return inPlace ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, k, f, w)
                     : MPI_Allgather(r.send, k, f, recv, k, f, w);
    case MpiColl::kBroadcast:  // one buffer in MPI: both placements use recv
      return MPI_Bcast(recv, k, f, r.root, w);
    case MpiColl::kReduce:
      if (!inPlace) return MPI_Reduce(r.send, recv, k, f, MPI_SUM, r.root, w);
      return MPI_Reduce(isRoot ? MPI_IN_PLACE : recv, isRoot ? recv : nullptr, k, f, MPI_SUM,
                        r.root, w);
    case MpiColl::kReduceScatter:
      return MPI_Reduce_scatter_block(inPlace ? MPI_IN_PLACE : r.send, recv, k, f, MPI_SUM, w);
    case MpiColl::kAlltoAll:
      return inPlace ? MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, k, f, w)
                     : MPI_Alltoall(r.send, k, f, recv, k, f, w);
    case MpiColl::kGather:
      if (!inPlace) return MPI_Gather(r.send, k, f, recv, k, f, r.root, w);
      return isRoot ? MPI_Gather(MPI_IN_PLACE, k, f, recv, k, f, r.root, w)
                    : MPI_Gather(mine, k, f, nullptr, k, f, r.root, w);
    case MpiColl::kScatter:
      if (!inPlace) return MPI_Scatter(r.send, k, f, recv, k, f, r.root, w);
      return isRoot ? MPI_Scatter(recv, k, f, MPI_IN_PLACE, k, f, r.root, w)
                    : MPI_Scatter(nullptr, k, f, mine, k, f, r.root, w);
    case MpiColl::kSendRecv: {
      int right = (r.rank + 1) % r.n, left = (r.rank + r.n - 1) % r.n;
      if (inPlace) return MPI_Sendrecv_replace(recv, k, f, right, 0, left, 0, w, MPI_STATUS_IGNORE);
      return MPI_Sendrecv(r.send, k, f, right, 0, recv, k, f, left, 0, w, MPI_STATUS_IGNORE);
    }
  }
  return MPI_ERR_OTHER;
}

bool op(const Run& r, size_t count, bool inPlace) {
  return mpiOk(callColl(r, count, inPlace), r.rank, r.c->mpiCall);
}

// Where this rank's input goes: Bcast has a single buffer in MPI.
float* inputBuf(const Run& r, const MpiLayout& l, bool inPlace) {
  return inPlace || r.c->coll == MpiColl::kBroadcast ? r.recv + l.inPlaceOff : r.send;
}

int64_t countWrongColl(const Run& r, size_t count, const MpiLayout& l, uint64_t seed) {
  int64_t wrong = 0;
  for (size_t k = 0; k < l.outElems; ++k) {
    MpiSource s = mpiCollSource(*r.c, count, r.n, r.rank, r.root, k);
    float want = s.srcRank < 0 ? expectedSum(seed, r.n, s.srcIdx)
                               : static_cast<float>(inputInt(seed, s.srcRank, s.srcIdx));
    if (std::memcmp(&want, r.recv + l.outOff + k, sizeof want) != 0) ++wrong;
  }
  return wrong;
}

bool measure(const Options& o, const Run& r, size_t sizeIndex, size_t count, bool inPlace,
             Half* out) {
  MpiLayout l = mpiCollLayout(*r.c, count, r.n, r.rank, r.root, inPlace);
  float* in = inputBuf(r, l, inPlace);
  fillInput(in, l.inElems, 0, r.rank);
  for (int i = 0; i < o.warmup; ++i) {
    if (!op(r, count, inPlace)) return false;
  }
  if (!mpiOk(MPI_Barrier(MPI_COMM_WORLD), r.rank, "MPI_Barrier")) return false;
  // Buffers walk as in Ferry's *_perf tools (iterationShift). Without it this
  // driver timed warm buffers against Ferry's cold ones (2-rank Broadcast
  // 64K-1M: Ferry's times doubled from -e 4M to -e 64M, this driver's did not).
  size_t span = std::max({l.inElems, l.inPlaceOff + l.inElems, l.outOff + l.outElems}) * sizeof(float);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) {
    size_t shift = bench::iterationShift(span, o.maxBytes, i) / sizeof(float);
    Run at = r;
    at.send += shift;
    at.recv += shift;
    if (!op(at, count, inPlace)) return false;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                o.iters;
  int64_t wrong = 0;
  for (int c = 0; c < o.check && wrong == 0; ++c) {
    uint64_t seed = checkSeed(sizeIndex, c);
    fillInput(in, l.inElems, seed, r.rank);
    if (!op(r, count, inPlace)) return false;
    wrong += countWrongColl(r, count, l, seed);
  }
  int bad = wrong > 0 ? 1 : 0, badRanks = 0;
  int64_t sumWrong = 0;
  double maxSecs = 0;
  MPI_Comm w = MPI_COMM_WORLD;
  if (!mpiOk(MPI_Reduce(&secs, &maxSecs, 1, MPI_DOUBLE, MPI_MAX, 0, w), r.rank, "MPI_Reduce") ||
      !mpiOk(MPI_Reduce(&wrong, &sumWrong, 1, MPI_INT64_T, MPI_SUM, 0, w), r.rank, "MPI_Reduce") ||
      !mpiOk(MPI_Reduce(&bad, &badRanks, 1, MPI_INT, MPI_SUM, 0, w), r.rank, "MPI_Reduce")) {
    return false;
  }
  *out = makeHalf(mpiCollSizeColumn(*r.c, count, r.n), maxSecs, mpiCollBusFactor(*r.c, r.n),
                  o.check > 0 ? sumWrong : -1, badRanks);
  return true;
}

// Untimed ops at the first size until rank 0 has seen 200 ms pass: ranks
// spread over cores and MPI sets up its connections outside the first row.
bool settle(const Run& r, size_t count) {
  auto t0 = std::chrono::steady_clock::now();
  for (int more = 1; more != 0;) {
    for (int i = 0; i < 10; ++i) {
      if (!op(r, count, false)) return false;
    }
    more = r.rank == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200);
    if (!mpiOk(MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD), r.rank, "MPI_Bcast")) {
      return false;
    }
  }
  return true;
}

int sweep(const Options& o, Run r, Report* report) {
  // perRank sizes hold count * n <= bytes elements; the others count.
  size_t elems = o.maxBytes / sizeof(float) + 16;
  r.send = allocFloats(elems);
  r.recv = allocFloats(elems);
  int code = r.send && r.recv ? kExitOk : kExitInternal;
  if (code != kExitOk) std::fprintf(stderr, "rank %d: cannot allocate buffers\n", r.rank);
  std::vector<size_t> sizes = sweepSizes(o, sizeof(float));
  if (code == kExitOk && !sizes.empty() && !settle(r, mpiCollCount(*r.c, sizes[0], r.n))) {
    code = kExitLibrary;
  }
  for (size_t k = 0; k < sizes.size() && code == kExitOk; ++k) {
    size_t count = mpiCollCount(*r.c, sizes[k], r.n);
    if (count * static_cast<size_t>(r.n) > static_cast<size_t>(INT_MAX)) {
      std::fprintf(stderr, "rank %d: count %zu exceeds MPI's int count\n", r.rank, count);
      code = kExitUsage;
      break;
    }
    Half oop, ip;
    if (!measure(o, r, k, count, false, &oop) || !measure(o, r, k, count, true, &ip)) {
      code = kExitLibrary;
      break;
    }
    if (report != nullptr) {
      report->row(mpiCollSizeColumn(*r.c, count, r.n), count, "float",
                  r.c->reduces ? "sum" : "none", r.c->rooted ? r.root : -1, oop, ip);
    }
  }
  freeFloats(r.send);
  freeFloats(r.recv);
  if (report != nullptr && code == kExitOk) {
    report->footer();
    if (report->outOfBounds() > 0) code = kExitWrong;
  }
  return code;
}

// Takes --coll NAME and --root R out of argv; the rest is bench_options'.
bool takeOwnArgs(int* argc, char** argv, std::string* coll, int* root) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string a = argv[i];
    if ((a == "--coll" || a == "--root") && i + 1 < *argc) {
      if (a == "--coll") *coll = argv[++i];
      else *root = std::atoi(argv[++i]);
      continue;
    }
    if (a == "--coll" || a == "--root") return false;
    argv[out++] = argv[i];
  }
  *argc = out;
  return true;
}

}  // namespace
}  // namespace ferry::bench

int main(int argc, char** argv) {
  using namespace ferry::bench;
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  std::string collName = "all_reduce", error;
  int root = 0;
  Options o;
  bool ok = takeOwnArgs(&argc, argv, &collName, &root);
  const MpiCollInfo* coll = findMpiColl(collName);
  if (!ok) error = "--coll and --root need a value";
  else if (coll == nullptr) error = "unknown --coll '" + collName + "' (" + mpiCollNames() + ")";
  else if (root < 0 || root >= nranks) error = "--root must be in [0, " + std::to_string(nranks) + ")";
  else ok = parseOptions(argc, argv, &o, &error);
  ok = ok && coll != nullptr && error.empty();
  if (!ok || o.help) {
    if (rank == 0) {
      if (!o.help) std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
      std::fprintf(o.help ? stdout : stderr, "extra options: --coll {%s} (default all_reduce), "
                   "--root R (default 0)\n%s", mpiCollNames().c_str(),
                   usage(argv[0], Options()).c_str());
    }
    MPI_Finalize();
    return o.help ? kExitOk : kExitUsage;
  }
  if (o.timeoutSec > 0) alarm(static_cast<unsigned>(o.timeoutSec));

  std::string test = std::string(coll->testName) + " (MPI)";
  Report report(stdout, test.c_str());
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version);
    v = v.substr(0, v.find('\n'));
    report.header(std::string("mpi_coll_perf (") + coll->mpiCall + " baseline): " + v, o, nranks,
                  "max over ranks of each rank's mean per op");
    report.columns();
  }
  Run run{coll, rank, nranks, root, nullptr, nullptr};
  int code = sweep(o, run, rank == 0 ? &report : nullptr);
  if (code == kExitLibrary) MPI_Abort(MPI_COMM_WORLD, code);
  MPI_Finalize();
  return code;
}
