// Deterministic float inputs whose sum over ranks is exact in any order:
// every value is an integer in [-512, 511], so a sum over up to 2^14 ranks
// stays far below 2^24 and no rounding can happen. The expected result can
// therefore be compared bit for bit, as nccl-tests does.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::bench {

// Rank `rank`'s value at element i for a given seed (an integer-valued float).
inline int32_t inputInt(uint64_t seed, int rank, size_t i) {
  uint32_t x = static_cast<uint32_t>(i + 1) * 0x9E3779B1u;
  x ^= static_cast<uint32_t>(rank + 1) * 0x85EBCA77u;
  x ^= static_cast<uint32_t>(seed) * 0xC2B2AE3Du;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  return static_cast<int32_t>(x & 1023u) - 512;
}

void fillInput(float* buf, size_t count, uint64_t seed, int rank);

// The exact float sum of all ranks' inputs at element i.
float expectedSum(uint64_t seed, int nranks, size_t i);

// Elements of buf that differ (as bit patterns) from the expected sum.
int64_t countWrong(const float* buf, size_t count, uint64_t seed, int nranks);

// Seed for check repetition `rep` of size index `sizeIndex`; never 0, which
// the timed iterations use.
inline uint64_t checkSeed(size_t sizeIndex, int rep) {
  return 1 + sizeIndex * 1000 + static_cast<uint64_t>(rep);
}

}  // namespace ferry::bench
