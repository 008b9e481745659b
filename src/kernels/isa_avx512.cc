// Kernel table for AVX-512 F/BW/VL/DQ + F16C; compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq.
// The flags are set per file in CMakeLists.txt; reduce.cc calls this only
// when the CPU supports them.
#include "kernels/simd_kernels.h"

namespace ferry::kernels::detail {

const KernelTable& avx512Table() {
  static constexpr KernelTable kTable = buildTable();
  return kTable;
}

}  // namespace ferry::kernels::detail
