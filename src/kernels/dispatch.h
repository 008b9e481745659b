// Internal: per-ISA kernel tables and run-time selection.
//
// The vector kernels are compiled once per instruction set (isa_*.cc, each
// with its own -m flags) from the same templates; reduce.cc picks the best
// table the CPU supports. Tests reach every table through tableFor() to check
// that each one matches the scalar reference bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/reduce.h"

namespace ferry::kernels::detail {

enum class Isa : int { kGeneric = 0, kAvx2, kAvx512, kCount };
const char* isaName(Isa isa);

// dst2 may be nullptr everywhere it appears.
using ReduceFn = void (*)(void* dst, void* dst2, const void* a, const void* b, size_t n);
using ScaledFn = void (*)(void* dst, void* dst2, const void* a, const void* b, size_t n,
                          const Scalar& s);
using ScaleFn = void (*)(void* dst, const void* src, size_t n, const Scalar& s);
using DivideFn = void (*)(void* dst, const void* src, size_t n, uint64_t d);

struct KernelTable {
  ReduceFn reduce[kNumDTypes][kNumOps];
  ScaledFn reduceScaled[kNumDTypes];
  ScaleFn scale[kNumDTypes];
  DivideFn divide[kNumDTypes];
};

// The table for isa, or nullptr if this CPU (or this build) lacks it.
const KernelTable* tableFor(Isa isa);
// The ISA the public functions use: the best one available.
Isa activeIsa();
const KernelTable& activeTable();

// Defined in isa_*.cc; call only after checking CPU support.
const KernelTable& genericTable();
const KernelTable& avx2Table();
const KernelTable& avx512Table();

}  // namespace ferry::kernels::detail
