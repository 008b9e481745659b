// A tiny TCP store for the env launch mode (torchrun / Slurm without MPI):
// rank 0 listens at host:port and hands the opaque id (the 128-byte
// ncclUniqueId) to every other rank; the others connect with retry. Both
// sides give up at a deadline with a message on stderr, never hang.
#pragma once

#include <cstddef>
#include <string>

namespace ferry::perf {

// Rank 0: binds host:port, serves id to `clients` connections, then closes.
bool storeServe(const std::string& host, int port, int clients, const void* id, size_t size,
                int timeoutSec);

// Other ranks: connects to host:port (retrying until the deadline) and reads
// exactly size bytes into id.
bool storeFetch(const std::string& host, int port, void* id, size_t size, int timeoutSec);

}  // namespace ferry::perf
