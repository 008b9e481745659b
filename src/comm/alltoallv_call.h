// One ferryAlltoAllv call on a communicator whose shape lets the rail
// schedule run (algorithms/rail_alltoallv.cc): every rank's counts are
// gathered first, so that each rank knows the whole byte matrix, then the
// exchange is chosen and built from it.
//
// Two runs in the group engine: an AllGather of each rank's [sendcounts |
// recvcounts] (2n uint64 per rank), then this call's exchange. Knowing
// every pair's counts also lets every rank check them: a pair whose
// sendcount and recvcount differ fails the call on every rank with the
// same ncclInvalidArgument, before any data moves (NCCL and MPI hang or
// corrupt memory here).
#pragma once

#include <memory>
#include <vector>

#include "algorithms/schedule.h"
#include "core/status.h"
#include "exec/executor.h"

namespace ferry {

class Comm;

class AlltoAllvCall {
 public:
  AlltoAllvCall(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                void* recvbuff, const size_t* recvcounts, const size_t* rdispls, int nranks,
                size_t elemSize);

  // The count exchange: an AllGather of 2n uint64 per rank.
  CollArgs gatherArgs(int rank) const;
  void* gatherInput() { return mine_.data(); }
  void* gatherOutput() { return all_.data(); }

  // Once the counts are in: check every pair, choose rail or direct as an
  // AlltoAll of the mean block would, and build the exchange.
  Result<Executor*> prepare(Comm* c);
  const void* sendbuff() const { return send_; }
  void* recvbuff() const { return recv_; }

 private:
  Status checkPairs() const;

  const void* send_;
  void* recv_;
  int n_;
  size_t elt_;
  std::vector<uint64_t> mine_;  // [sendcounts | recvcounts]
  std::vector<uint64_t> all_;   // n rows of mine_
  std::vector<size_t> sdispls_, rdispls_;
  std::unique_ptr<Executor> exec_;
};

}  // namespace ferry
