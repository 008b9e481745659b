// Kernel table for AVX2 + F16C; compiled with -mavx2 -mf16c.
// The flags are set per file in CMakeLists.txt; reduce.cc calls this only
// when the CPU supports them.
#include "kernels/simd_kernels.h"

namespace ferry::kernels::detail {

const KernelTable& avx2Table() {
  static constexpr KernelTable kTable = buildTable();
  return kTable;
}

}  // namespace ferry::kernels::detail
