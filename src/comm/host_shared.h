// A named shared-memory object that every rank of a communicator on one
// host maps (the failure board, the presence lines): "/ferry-<hash>-<what>".
// ftruncate of a new object zero-fills it; of an existing one of the same
// size it changes nothing, so whichever rank comes first needs no
// initialising. Every local rank maps it before any removes the name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace ferry {

struct HostShared {
  void* data;        // `bytes` bytes, read-write; munmap when done
  std::string name;  // for shm_unlink
};

Result<HostShared> openHostShared(uint64_t commHash, const char* what, size_t bytes);

}  // namespace ferry
