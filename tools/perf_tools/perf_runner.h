// The shared main of every *_perf binary: parses the nccl-tests command line,
// starts the ranks (forks --nranks, or joins an mpirun or torchrun/Slurm
// launch, see perf_launch.h), runs the sweep over types, ops, roots and
// sizes, prints nccl-tests rows and returns nccl-tests exit codes.
#pragma once

namespace ferry::perf {

// coll: the binary's collective, e.g. "all_reduce".
int perfMain(const char* coll, int argc, char** argv);

}  // namespace ferry::perf
