#include "tools/perf_tools/perf_mpi.h"

// Only the C API: the deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>

namespace ferry::perf {

bool mpiStart(int* argc, char*** argv, int* rank, int* nranks) {
  if (MPI_Init(argc, argv) != MPI_SUCCESS) {
    std::fprintf(stderr, "MPI_Init failed\n");
    return false;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, nranks);
  return true;
}

bool mpiBcast(void* data, size_t size) {
  int rc = MPI_Bcast(data, static_cast<int>(size), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) std::fprintf(stderr, "MPI_Bcast of the unique id failed (%d)\n", rc);
  return rc == MPI_SUCCESS;
}

void mpiStop() { MPI_Finalize(); }

}  // namespace ferry::perf
