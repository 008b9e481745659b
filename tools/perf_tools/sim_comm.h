// A communicator over forked ranks (tools/demo/fork_launch.h) spread over
// `nodes` simulated hosts: consecutive ranks share NCCL_HOSTID
// "<tag>-<parent pid>-<host>"; nodes 1 keeps the machine's own host id.
#pragma once

#include <nccl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tools/demo/fork_launch.h"

namespace ferry::bench {

// 0 with *comm set; 1: the id could not be shared; 3: an NCCL call failed.
inline int simulatedComm(RankContext& ctx, const char* tag, int nodes, ncclComm_t* comm) {
  const int rank = ctx.rank(), n = ctx.nranks();
  if (nodes > 1) {
    std::string host = std::string(tag) + "-" + std::to_string(getppid()) + "-" +
                       std::to_string(rank * nodes / n);
    setenv("NCCL_HOSTID", host.c_str(), 1);
  }
  ncclUniqueId id;
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) return 3;
  if (!(rank == 0 ? ctx.publish(&id, sizeof id) : ctx.receive(&id, sizeof id))) return 1;
  *comm = nullptr;
  return ncclCommInitRank(comm, n, id, rank) == ncclSuccess ? 0 : 3;
}

}  // namespace ferry::bench
