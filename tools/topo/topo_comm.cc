#include "tools/topo/topo_comm.h"

#include <nccl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include <ferry/view.h>

#include "algorithms/comm_view.h"
#include "comm/calibration.h"
#include "comm/comm.h"

namespace ferry::topo {
namespace {

constexpr int kWatchdogSec = 150;  // past FERRY_INIT_TIMEOUT_MS' default (120 s)

// Rank and size from an external launcher, first match wins: torchrun and
// tests/cluster/ferry-cluster (RANK/WORLD_SIZE), ferry-cluster's own names,
// Slurm, Open MPI, PMI. Launcher variables, not Ferry configuration, so not
// in params.def. False when none is set; *size = 0 when they are invalid.
bool launcherRank(int* rank, int* size) {
  static const char* kVars[][2] = {{"RANK", "WORLD_SIZE"},
                                   {"FERRY_CLUSTER_RANK", "FERRY_CLUSTER_NRANKS"},
                                   {"SLURM_PROCID", "SLURM_NTASKS"},
                                   {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                   {"PMI_RANK", "PMI_SIZE"}};
  for (auto& v : kVars) {
    const char* r = std::getenv(v[0]);
    const char* s = std::getenv(v[1]);
    if (!r || !s || !*r || !*s) continue;
    *rank = std::atoi(r);
    *size = std::atoi(s);
    if (*size <= 0 || *rank < 0 || *rank >= *size) {
      std::fprintf(stderr, "ferry-topo: %s=%s / %s=%s is not a rank and size\n", v[0], r, v[1], s);
      *size = 0;
    }
    return true;
  }
  return false;
}

bool ok(ncclResult_t r, const char* what, int rank) {
  if (r == ncclSuccess) return true;
  std::fprintf(stderr, "ferry-topo: rank %d: %s: %s (%s)\n", rank, what, ncclGetErrorString(r),
               ncclGetLastError(nullptr));
  return false;
}

// Rank 0's output: the table from the communicator's view, or the JSON from
// the public extension (so --json shows exactly what applications get).
bool printView(ncclComm_t comm, bool json) {
  if (!json) {
    const CommView& v = reinterpret_cast<Comm*>(comm)->view();
    std::fputs(viewTable(v, hostCalibration().source).c_str(), stdout);
    return true;
  }
  // 64 KiB fits a few hundred ranks; a larger view says its size (with a
  // WARN about the short buffer) and the second call fits.
  std::vector<char> buf(1 << 16);
  size_t len = buf.size();
  ncclResult_t r = ferryCommViewJson(comm, buf.data(), &len);
  if (r == ncclInvalidArgument && len > buf.size()) {
    buf.resize(len);
    r = ferryCommViewJson(comm, buf.data(), &len);
  }
  if (!ok(r, "ferryCommViewJson", 0)) return false;
  std::printf("%s\n", buf.data());
  return true;
}

// One rank: create, print (rank 0), destroy. Returns the exit status.
int runRank(const ncclUniqueId& id, int rank, int nranks, bool json) {
  ncclComm_t comm = nullptr;
  if (!ok(ncclCommInitRank(&comm, nranks, id, rank), "ncclCommInitRank", rank)) return 1;
  bool good = rank != 0 || printView(comm, json);
  std::fflush(stdout);
  good = ok(ncclCommDestroy(comm), "ncclCommDestroy", rank) && good;
  return good ? 0 : 1;
}

// The id travels from rank 0 to the other forked ranks through a shared
// page: the bootstrap root then lives in rank 0, not in a launcher that
// would fork while the root's thread runs.
struct IdBox {
  std::atomic<int> ready;
  ncclUniqueId id;
};

int forkedRank(IdBox* box, int rank, int nranks, bool json) {
  alarm(kWatchdogSec);
  if (rank == 0) {
    if (!ok(ncclGetUniqueId(&box->id), "ncclGetUniqueId", 0)) {
      box->ready.store(-1);
      return 1;
    }
    box->ready.store(1);
  }
  while (box->ready.load() == 0) usleep(1000);
  if (box->ready.load() < 0) return 1;
  return runRank(box->id, rank, nranks, json);
}

int forkRanks(int nranks, bool json) {
  void* page = mmap(nullptr, sizeof(IdBox), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return std::perror("ferry-topo: mmap"), 1;
  IdBox* box = new (page) IdBox{};
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(forkedRank(box, r, nranks, json));
    if (pid < 0) {
      std::perror("ferry-topo: fork");
      box->ready.store(-1);
      break;
    }
    pids.push_back(pid);
  }
  int status = static_cast<int>(pids.size()) == nranks ? 0 : 1;
  for (pid_t pid : pids) {
    int st = 0;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) status = 1;
  }
  munmap(page, sizeof(IdBox));
  return status;
}

}  // namespace

int runComm(int nranks, bool json) {
  int rank = 0, size = 0;
  if (nranks > 0 || !launcherRank(&rank, &size)) return forkRanks(nranks > 0 ? nranks : 2, json);
  if (size == 0) return 2;
  // Under a launcher every rank derives the same id from NCCL_COMM_ID.
  const char* commId = std::getenv("NCCL_COMM_ID");
  if (size > 1 && (!commId || !*commId)) {
    std::fprintf(stderr, "ferry-topo: rank %d of %d from the launcher's variables, but NCCL_COMM_ID "
                 "(host:port of the bootstrap root) is not set; or use --nranks N\n", rank, size);
    return 2;
  }
  ncclUniqueId id;
  if (!ok(ncclGetUniqueId(&id), "ncclGetUniqueId", rank)) return 1;
  return runRank(id, rank, size, json);
}

int runCalibrate() {
  HostCalibration c = measureCalibration();
  std::string path = calibrationPath();
  if (path.empty()) {
    std::printf("FERRY_CALIBRATION_FILE=none: nothing written\nmemcpy_mbs %g\nreduce_mbs %g\n"
                "step_latency_us %g\n", c.memcpyBytesPerUs, c.reduceBytesPerUs, c.stepLatencyUs);
    return 0;
  }
  Status st = writeCalibration(path, c);
  if (!st.isOk()) {
    std::fprintf(stderr, "ferry-topo: %s\n", st.message().c_str());
    return 1;
  }
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  std::printf("wrote %s:\n%s", path.c_str(), text.str().c_str());
  return 0;
}

}  // namespace ferry::topo
