// The benchmark drivers' check of an NCCL call (header-only: the harness
// library itself does not link an NCCL implementation).
#pragma once

#include <nccl.h>

#include <cstdio>

namespace ferry::bench {

// Prints nccl-tests' "Test NCCL failure" line with the library's last error;
// false on failure.
inline bool ncclOk(ncclResult_t r, ncclComm_t comm, int rank, const char* what) {
  if (r == ncclSuccess) return true;
  const char* last = ncclGetLastError(comm);
  std::fprintf(stderr, "rank %d: Test NCCL failure %s: '%s' (%s)\n", rank, what,
               ncclGetErrorString(r), last != nullptr ? last : "");
  return false;
}

}  // namespace ferry::bench
