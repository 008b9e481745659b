#include "tools/perf_tools/perf_launch.h"

#include <cstdlib>

namespace ferry::perf {
namespace {

// Launch detection reads the launcher's own variables, which are not Ferry
// configuration, so they are read here rather than through params.def.
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

bool toInt(const char* text, int lo, int hi, int* out) {
  if (text == nullptr) return false;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

bool underMpirun() {
  return env("OMPI_COMM_WORLD_SIZE") != nullptr || env("PMI_SIZE") != nullptr ||
         env("PMIX_RANK") != nullptr;
}

bool detectLaunch(int forkRanks, const std::string& storeHost, int storePort, Launch* out,
                  std::string* error) {
  *out = Launch{};
  out->nranks = forkRanks;
  if (forkRanks > 1) return true;
#ifdef FERRY_PERF_MPI
  if (underMpirun()) {
    out->mode = LaunchMode::kMpi;  // rank and size come from MPI_Init
    return true;
  }
#else
  // Without MPI every process would run a separate 1-rank test: say so.
  int mpiSize = 1;
  const char* mpiSizeText = env("OMPI_COMM_WORLD_SIZE");
  if (mpiSizeText == nullptr) mpiSizeText = env("PMI_SIZE");
  if (toInt(mpiSizeText, 1, 1 << 20, &mpiSize) && mpiSize > 1 && env("RANK") == nullptr &&
      env("SLURM_PROCID") == nullptr) {
    *error = "started under mpirun with " + std::to_string(mpiSize) +
             " processes, but this build has no MPI (configure with MPI found); use --nranks "
             "or RANK/WORLD_SIZE with --store";
    out->unavailable = true;
    return false;
  }
#endif
  const char* rankVar = "RANK";
  const char* sizeVar = "WORLD_SIZE";
  const char* localVar = "LOCAL_RANK";
  out->source = "torchrun";
  if (env("RANK") == nullptr && env("SLURM_PROCID") != nullptr) {
    rankVar = "SLURM_PROCID";
    sizeVar = "SLURM_NTASKS";
    localVar = "SLURM_LOCALID";
    out->source = "slurm";
  }
  if (env(rankVar) == nullptr) return true;  // no launcher: fork mode, 1 rank
  int size = 0, rank = 0;
  if (!toInt(env(sizeVar), 1, 1 << 20, &size) || !toInt(env(rankVar), 0, size - 1, &rank)) {
    *error = std::string(rankVar) + " / " + sizeVar + " are not a valid rank and size";
    return false;
  }
  if (size == 1) return true;  // a 1-task job needs no store
  out->mode = LaunchMode::kEnv;
  out->rank = rank;
  out->nranks = size;
  toInt(env(localVar), 0, 1 << 20, &out->localRank);
  if (storePort > 0) {
    out->storeHost = storeHost;
    out->storePort = storePort;
    return true;
  }
  const char* host = env("MASTER_ADDR");
  if (host == nullptr || !toInt(env("MASTER_PORT"), 1, 65535, &out->storePort)) {
    *error = out->source +
             " launch: give --store HOST:PORT, or set MASTER_ADDR and MASTER_PORT (1..65535), "
             "the address where rank 0 serves the unique id";
    return false;
  }
  out->storeHost = host;
  return true;
}

}  // namespace ferry::perf
