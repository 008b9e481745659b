// How the ranks of a perf run are started: forked by the tool (--nranks),
// one process per rank under mpirun, or one process per rank described by
// the environment (torchrun or Slurm variables) with the id exchanged
// through the tool's TCP store.
#pragma once

#include <string>

namespace ferry::perf {

enum class LaunchMode { kFork, kMpi, kEnv };

struct Launch {
  LaunchMode mode = LaunchMode::kFork;
  int rank = 0;
  int nranks = 1;
  int localRank = 0;
  std::string storeHost;  // env mode: rank 0's store
  int storePort = 0;
  std::string source;     // "torchrun" or "slurm", for messages
  bool unavailable = false;  // set with a false return: exit 5, not a usage error
};

// forkRanks: --nranks (more than 1 forces fork mode); storeHost/storePort:
// --store, which overrides MASTER_ADDR/MASTER_PORT (port 0 = not given).
// Returns false with *error set when the environment names a launch that
// cannot work (e.g. Slurm without any store address).
bool detectLaunch(int forkRanks, const std::string& storeHost, int storePort, Launch* out,
                  std::string* error);

// True when Open MPI or a PMI launcher started this process.
bool underMpirun();

}  // namespace ferry::perf
