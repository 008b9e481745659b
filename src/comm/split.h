// ncclCommSplit: a collective over the parent that creates one child
// communicator per color.
#pragma once

#include <memory>

#include "comm/comm.h"

namespace ferry {

// Returns nullptr (and ok) for NCCL_SPLIT_NOCOLOR. Children are ordered by
// (key, parent rank). Each color's first member starts a fresh bootstrap
// root, and its id reaches the others through the parent's allgather.
Result<std::unique_ptr<Comm>> splitComm(Comm* parent, int color, int key, const CommConfig& cfg);

}  // namespace ferry
