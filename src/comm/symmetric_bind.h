// Whether a collective runs on symmetric windows, and its binding.
//
// A call qualifies when its buffers lie in shared windows of its
// communicator (every rank of one host maps them: src/mem/window.h), the
// algorithm registry has a symmetric schedule for its kind, and its
// reduction is the same on every rank (not PreMulSum, whose scalar is each
// rank's own). Every rank decides from its own buffers; NCCL's rule that
// window buffers are used at the same offsets on every rank makes them
// decide alike, and the first barrier checks that they did.
#pragma once

#include <memory>

#include "comm/comm.h"
#include "comm/group.h"
#include "mem/window_binding.h"

namespace ferry {

// The binding for `t` (run as operation `info`), or null: not symmetric.
std::unique_ptr<mem::WindowBinding> bindWindows(Comm* c, const CollTask& t, const OpInfo& info);

}  // namespace ferry
