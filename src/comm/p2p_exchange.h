// A group's Send/Recv as one rail-local exchange (FERRY_P2P_RAIL=1).
//
// The MoE dispatch shape (torch's all_to_all_single with uneven splits, and
// most hand-written dispatchers) is a group with one send to and one
// receive from every rank. On a rail-shaped communicator that group can run
// as ferryAlltoAllv's rail exchange: blocks gathered per host and rail, one
// message per remote host. Counts are bytes (each op may have its own
// datatype); buffers are per op, so displacements are taken from the lowest
// address on each side. A receive that overlaps a send (in place) is safe:
// the sends are then read from a copy.
//
// Every rank must agree that the group is an exchange, and a rank can only
// see its own ops: hence opt-in, with the contract that all ranks issue a
// full exchange in that group (a partial one leaves its peers waiting until
// FERRY_TIMEOUT_MS, and the operation check names the disagreement when
// data does arrive).
#pragma once

#include <memory>
#include <vector>

#include "comm/alltoallv_call.h"
#include "comm/group.h"

namespace ferry {

// The exchange for `p2ps` (this rank's Send/Recv on c in one group), or
// null when FERRY_P2P_RAIL is off, the communicator is not rail-shaped or
// the ops are not one full exchange (they then run as they are).
std::shared_ptr<AlltoAllvCall> p2pRailExchange(Comm* c, const std::vector<P2pTask>& p2ps);

// Whether a receive of the batch overlaps one of its sends (an in-place
// Send/Recv): the sends must then be read from a copy taken before anything
// moves, since a peer may still read a send block by reference while we
// receive into it.
bool sendsOverlapReceives(const std::vector<P2pTask>& p2ps);

}  // namespace ferry
