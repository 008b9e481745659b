// mpi_allreduce: the MPI_Allreduce baseline (float, sum) in the same sizes,
// data, checks, timing and row format as ferry_allreduce_demo; only the
// collective differs. Launch with
//   mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np N mpi_allreduce ...
// The time combination across ranks (max of per-rank means) is done with
// MPI_Reduce here instead of the demo's shared region.

#include <mpi.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/demo/bench_options.h"
#include "tools/demo/bench_report.h"
#include "tools/demo/bench_sweep.h"
#include "tools/demo/fork_launch.h"

namespace ferry::bench {
namespace {

bool mpiOk(int rc, int rank, const char* what) {
  if (rc == MPI_SUCCESS) return true;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, text);
  return false;
}

class MpiBackend : public SweepBackend {
 public:
  explicit MpiBackend(int rank) : rank_(rank) {}

  bool allReduce(const float* send, float* recv, size_t count) override {
    if (count > static_cast<size_t>(INT_MAX)) {
      std::fprintf(stderr, "rank %d: count %zu exceeds MPI's int count\n", rank_, count);
      return false;
    }
    const void* src = send == recv ? MPI_IN_PLACE : send;
    return mpiOk(MPI_Allreduce(src, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD),
                 rank_, "MPI_Allreduce");
  }

  bool barrier() override {
    token_ = 0;
    return mpiOk(MPI_Allreduce(MPI_IN_PLACE, &token_, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                 rank_, "MPI_Allreduce (barrier)");
  }

  bool combine(double seconds, int64_t wrong, double* maxSeconds, int64_t* sumWrong,
               int* badRanks) override {
    int64_t w = wrong > 0 ? wrong : 0;
    int bad = wrong > 0 ? 1 : 0;
    return mpiOk(MPI_Reduce(&seconds, maxSeconds, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD),
                 rank_, "MPI_Reduce") &&
           mpiOk(MPI_Reduce(&w, sumWrong, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD), rank_,
                 "MPI_Reduce") &&
           mpiOk(MPI_Reduce(&bad, badRanks, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD), rank_,
                 "MPI_Reduce");
  }

 private:
  int rank_;
  float token_ = 0;
};

std::string firstLine(const char* text) {
  std::string s(text);
  size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

void printHeader(Report& report, const Options& o, int nranks) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  report.header("mpi_allreduce (MPI_Allreduce baseline): " + firstLine(version), o, nranks,
                "max over ranks of each rank's mean per op");
}

// Rank 0 lists every rank's pid and host, like nccl-tests' device lines.
void printRanks(Report* report, int rank, int nranks) {
  int pid = static_cast<int>(getpid());
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  std::vector<int> pids(rank == 0 ? nranks : 0);
  std::vector<char> hosts(rank == 0 ? nranks * sizeof host : 0);
  MPI_Gather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Gather(host, sizeof host, MPI_CHAR, hosts.data(), sizeof host, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (report == nullptr) return;
  for (int r = 0; r < nranks; ++r) {
    char line[160];
    std::snprintf(line, sizeof line, " Rank %2d Pid %6d on %10s host memory", r, pids[r],
                  &hosts[r * sizeof host]);
    report->comment(line);
  }
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

  Options o;
  std::string error;
  if (!parseOptions(argc, argv, &o, &error) || o.help) {
    if (rank == 0) {
      if (!o.help) std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
      std::fputs(usage(argv[0], Options()).c_str(), o.help ? stdout : stderr);
    }
    MPI_Finalize();
    return o.help ? kExitOk : kExitUsage;
  }
  // The rank count is mpirun's -np; --nranks only documents the intent.
  if (rank == 0 && o.nranks != nranks && o.nranks != Options().nranks) {
    std::fprintf(stderr, "%s: --nranks %d ignored; running on %d MPI ranks\n", argv[0], o.nranks,
                 nranks);
  }
  // Watchdog: SIGALRM ends a hung rank and mpirun then tears the job down.
  if (o.timeoutSec > 0) alarm(static_cast<unsigned>(o.timeoutSec));

  Report report(stdout, "all_reduce_perf (MPI)");
  if (rank == 0) printHeader(report, o, nranks);
  printRanks(rank == 0 ? &report : nullptr, rank, nranks);
  if (rank == 0) report.columns();

  MpiBackend backend(rank);
  int code = runAllReduceSweep(o, rank, nranks, backend, rank == 0 ? &report : nullptr);
  if (code == kExitLibrary) MPI_Abort(MPI_COMM_WORLD, code);
  MPI_Finalize();
  return code;
}
