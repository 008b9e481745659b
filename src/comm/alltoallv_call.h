// One ferryAlltoAllv call run rail-local (algorithms/rail_alltoallv.cc) on a
// communicator of >= 2 hosts with the same number (>= 2) of ranks each.
//
// Two runs in the group engine. First the host's ranks swap counts over
// shared memory: rank (h, j) tells each local peer (h, i) what it sends to
// local rank i of every host, which is all a forwarder must know besides
// its own counts; the receivers' sizes are their own recvcounts. Then the
// exchange is built from those counts and run.
//
// Nothing is exchanged across hosts beforehand: a global count exchange
// would make every call wait for the slowest rank of the job (measured:
// that barrier cost more than the aggregation saved; docs/tuning.md).
// Counts that disagree still never pass silently: a local pair is checked
// against the swapped counts (ncclInvalidArgument naming the pair, the
// communicator then fails as after any error), a remote pair by the
// operation check of the rail message (op_check.h).
#pragma once

#include <memory>
#include <vector>

#include "core/status.h"
#include "exec/executor.h"

namespace ferry {

class Comm;

class AlltoAllvCall {
 public:
  AlltoAllvCall(Comm* c, const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                void* recvbuff, const size_t* recvcounts, const size_t* rdispls, size_t elemSize);

  // The count swap with this host's ranks (its buffers are the call's own).
  Executor* countSwap() { return swap_.get(); }
  // Once the counts are in: check the local pairs, build the exchange.
  Result<Executor*> prepare(Comm* c);
  // Memory the call reads from that it must keep alive (a copy of its input).
  void own(std::shared_ptr<void> m) { owned_ = std::move(m); }

 private:
  Status fillMatrix(Comm* c, struct AlltoAllvMatrix* m) const;

  const void* send_;
  void* recv_;
  int n_;
  size_t elt_;
  std::vector<size_t> sendcounts_, recvcounts_, sdispls_, rdispls_;
  std::vector<uint64_t> out_, in_;  // [local peer j][host g]: counts for / from (g, j)
  std::unique_ptr<Executor> swap_, exec_;
  std::shared_ptr<void> owned_;
};

}  // namespace ferry
