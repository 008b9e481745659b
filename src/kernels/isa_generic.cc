// Kernel table for plain x86-64 (SSE2), also the fallback on other CPUs.
// The flags are set per file in CMakeLists.txt; reduce.cc calls this only
// when the CPU supports them.
#include "kernels/simd_kernels.h"

namespace ferry::kernels::detail {

const KernelTable& genericTable() {
  static constexpr KernelTable kTable = buildTable();
  return kTable;
}

}  // namespace ferry::kernels::detail
