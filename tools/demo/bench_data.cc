#include "tools/demo/bench_data.h"

#include <cstring>

namespace ferry::bench {

void fillInput(float* buf, size_t count, uint64_t seed, int rank) {
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(inputInt(seed, rank, i));
}

float expectedSum(uint64_t seed, int nranks, size_t i) {
  int64_t sum = 0;
  for (int r = 0; r < nranks; ++r) sum += inputInt(seed, r, i);
  return static_cast<float>(sum);
}

int64_t countWrong(const float* buf, size_t count, uint64_t seed, int nranks) {
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float want = expectedSum(seed, nranks, i);
    uint32_t a, b;
    std::memcpy(&a, &buf[i], sizeof a);
    std::memcpy(&b, &want, sizeof b);
    wrong += (a != b);
  }
  return wrong;
}

}  // namespace ferry::bench
