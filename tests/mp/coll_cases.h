// One collective case = fill inputs, call the collective through the public
// API on a live communicator (host buffers, NULL stream: the call returns
// after completion), then check every output element exactly, plus guard
// elements past the end of each receive buffer (no overrun, and nothing at
// all written when count is 0). Each returns 0 or 1 (message recorded).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <functional>
#include <initializer_list>

#include "tests/mp/mp_util.h"

namespace ferry::mp {

struct Rank {
  ncclComm_t comm;
  int rank;
  int nranks;
};

// Creates this rank's communicator (ncclCommInitRank), runs f, then
// finalizes and destroys it; on failure aborts it instead. Returns f's code.
int withComm(int rank, int nranks, const ncclUniqueId& id, const std::function<int(const Rank&)>& f);

int caseAllReduce(const Rank& me, const RedCase& c, size_t count, bool inPlace);
int caseReduce(const Rank& me, const RedCase& c, size_t count, int root, bool inPlace);
int caseReduceScatter(const Rank& me, const RedCase& c, size_t recvcount, bool inPlace);
int caseBroadcast(const Rank& me, ncclDataType_t dt, size_t count, int root, bool inPlace);
int caseBcast(const Rank& me, ncclDataType_t dt, size_t count, int root);
int caseAllGather(const Rank& me, ncclDataType_t dt, size_t count, bool inPlace);
int caseAlltoAll(const Rank& me, ncclDataType_t dt, size_t count);
int caseGather(const Rank& me, ncclDataType_t dt, size_t count, int root, bool inPlace);
int caseScatter(const Rank& me, ncclDataType_t dt, size_t count, int root, bool inPlace);
// Ring: send to rank+1, receive from rank-1, both inside one group.
int caseSendRecvRing(const Rank& me, ncclDataType_t dt, size_t count);
// Every rank sends a distinct block to every rank (itself included) and
// receives one from each, all inside one group.
int caseSendRecvAllPairs(const Rank& me, ncclDataType_t dt, size_t count);

// Every movement collective (Broadcast, Bcast, AllGather, AlltoAll, Gather,
// Scatter, ring Send/Recv) for one datatype and count, roots 0 and n-1.
int caseAllMovement(const Rank& me, ncclDataType_t dt, size_t count);
// AllReduce, Reduce (root n-1) and ReduceScatter for one reduction case.
int caseAllReductions(const Rank& me, const RedCase& c, size_t count);
// Every collective, in place where NCCL has the form, at each count: the
// buffer-kind suites (buffers_test.cc, device_test.cc) run it on their memory.
int caseEveryShape(const Rank& me, std::initializer_list<size_t> counts);

}  // namespace ferry::mp
