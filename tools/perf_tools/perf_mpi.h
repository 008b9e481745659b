// The mpirun launch mode, built only when CMake finds MPI (FERRY_PERF_MPI).
// MPI is used for nothing but rank/size and the unique id broadcast; times
// and wrong counts are combined over the NCCL communicator as in every mode.
#pragma once

#include <cstddef>

namespace ferry::perf {

// MPI_Init; false (after a message) when it failed.
bool mpiStart(int* argc, char*** argv, int* rank, int* nranks);
// MPI_Bcast of size bytes from rank 0.
bool mpiBcast(void* data, size_t size);
void mpiStop();

}  // namespace ferry::perf
