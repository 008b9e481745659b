// Fuzz target: alltoallv_perf's traffic-matrix file
// (NCCL_TESTS_ALLTOALLV_MATRIX_FILE, tools/perf_tools/perf_alltoallv_pattern.cc),
// parsed and then used as the runner does: run-time checks and per-rank plans.
// The first byte picks the scale (NCCL_TESTS_ALLTOALLV_MATRIX_SCALE).
#include <cmath>
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "tools/perf_tools/perf_alltoallv.h"

using namespace ferry::perf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const double kScales[] = {1.0, 0.0, 0.5, 1e6, 1e30, 3.25, NAN, INFINITY};
  AlltoallvPattern p;
  p.file = "fuzz.txt";
  p.scale = kScales[data[0] % (sizeof(kScales) / sizeof(kScales[0]))];
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string error;
  if (!parseAlltoallvMatrix(text, p.file, &p, &error)) {
    FUZZ_CHECK(!error.empty());
    return 0;
  }
  FUZZ_CHECK(p.dim > 0 && p.matrix.size() == size_t(p.dim) * size_t(p.dim));
  for (size_t v : p.matrix) FUZZ_CHECK(v % 16 == 0);
  int n = p.dim < 16 ? p.dim : 16;
  for (size_t bytes : {size_t(0), size_t(1) << 20}) (void)alltoallvRunError(p, bytes, bytes, n);
  for (size_t elt : {size_t(1), size_t(4), size_t(8)}) {
    size_t send = 0, recv = 0;
    p.maxCounts(0, elt, n, &send, &recv);
    for (int rank = 0; rank < n; ++rank) {
      AlltoallvPlan plan = alltoallvPlan(p, 0, elt, n, rank);
      FUZZ_CHECK(plan.sendCounts.size() == size_t(n) && plan.recvCounts.size() == size_t(n));
    }
  }
  return 0;
}
