#include "tools/perf_tools/perf_data.h"

#include <cmath>
#include <cstring>

namespace ferry::perf {
namespace {

struct TypeInfo {
  size_t size;
  bool isFloat;
  int expBits, mantBits;  // minifloats (half, bfloat16, fp8); 0 for native types
  uint64_t exactMax;      // every integer 0..exactMax is representable
  int maxPow2;            // 2^maxPow2 is representable (and fits in uint64)
};

// int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2
const TypeInfo kTypes[] = {
    {1, false, 0, 0, 127, 6},         {1, false, 0, 0, 255, 7},
    {4, false, 0, 0, 1u << 30, 30},   {4, false, 0, 0, 1u << 31, 31},
    {8, false, 0, 0, 1ull << 62, 62}, {8, false, 0, 0, 1ull << 63, 63},
    {2, true, 5, 10, 2048, 15},       {4, true, 0, 0, 1u << 24, 60},
    {8, true, 0, 0, 1ull << 53, 60},  {2, true, 8, 7, 256, 60},
    {1, true, 4, 3, 16, 8},           {1, true, 5, 2, 8, 15},
};

uint32_t mix(uint64_t seed, int rank, size_t i) {
  uint32_t x = static_cast<uint32_t>(i + 1) * 0x9E3779B1u;
  x ^= static_cast<uint32_t>(rank + 1) * 0x85EBCA77u;
  x ^= static_cast<uint32_t>(seed) * 0xC2B2AE3Du;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  x *= 0x297A2D39u;
  x ^= x >> 15;
  return x;
}

uint64_t minifloatBits(uint64_t v, int eb, int mb) {
  if (v == 0) return 0;
  int e = 63 - __builtin_clzll(v);
  uint64_t bias = (1u << (eb - 1)) - 1;
  uint64_t mant = e >= mb ? (v - (1ull << e)) >> (e - mb) : (v - (1ull << e)) << (mb - e);
  return ((e + bias) << mb) | mant;
}

double minifloatValue(uint64_t bits, int eb, int mb) {
  int bias = (1 << (eb - 1)) - 1;
  uint64_t exp = (bits >> mb) & ((1u << eb) - 1);
  double mant = static_cast<double>(bits & ((1u << mb) - 1));
  double sign = (bits >> (eb + mb)) & 1 ? -1.0 : 1.0;
  if (exp == 0) return sign * std::ldexp(mant, 1 - bias - mb);
  return sign * std::ldexp(1.0 + mant / (1 << mb), static_cast<int>(exp) - bias);
}

uint64_t loadBits(const void* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);  // little endian: the low bytes
  return v;
}

}  // namespace

size_t typeSize(int type) { return kTypes[type].size; }

uint64_t inputValue(uint64_t seed, int type, int op, int nranks, int rank, size_t i) {
  const TypeInfo& t = kTypes[type];
  uint32_t h = mix(seed, rank, i);
  uint64_t span = t.exactMax < 100 ? t.exactMax : 100;
  switch (op) {
    case kOpProd:
      // At most maxPow2 ranks may contribute a 2, so the product fits.
      return rank < t.maxPow2 && (h & 1) ? 2 : 1;
    case kOpSum:
    case kOpAvg: {
      uint64_t k = t.exactMax / static_cast<uint64_t>(nranks);
      if (k > 100) k = 100;
      if (k >= 1) return h % (k + 1);
      // More ranks than exact integers: one rank per element contributes.
      return static_cast<size_t>(rank) == i % static_cast<size_t>(nranks) ? h % (span + 1) : 0;
    }
    default:
      return h % (span + 1);
  }
}

void encode(uint64_t v, int type, void* dst) {
  const TypeInfo& t = kTypes[type];
  if (!t.isFloat) {
    std::memcpy(dst, &v, t.size);  // little endian: the low bytes
  } else if (t.expBits != 0) {
    uint64_t bits = minifloatBits(v, t.expBits, t.mantBits);
    std::memcpy(dst, &bits, t.size);
  } else if (t.size == 4) {
    float f = static_cast<float>(v);
    std::memcpy(dst, &f, 4);
  } else {
    double d = static_cast<double>(v);
    std::memcpy(dst, &d, 8);
  }
}

double decode(int type, const void* src) {
  const TypeInfo& t = kTypes[type];
  uint64_t bits = loadBits(src, t.size);
  if (!t.isFloat) {
    bool isSigned = type == 0 || type == 2 || type == 4;
    if (!isSigned) return static_cast<double>(bits);
    int shift = 64 - 8 * static_cast<int>(t.size);
    return static_cast<double>(static_cast<int64_t>(bits << shift) >> shift);
  }
  if (t.expBits != 0) return minifloatValue(bits, t.expBits, t.mantBits);
  if (t.size == 4) {
    float f;
    std::memcpy(&f, src, 4);
    return f;
  }
  double d;
  std::memcpy(&d, src, 8);
  return d;
}

void fillInputs(void* buf, size_t count, uint64_t seed, int type, int op, int nranks, int rank) {
  auto* p = static_cast<unsigned char*>(buf);
  size_t sz = kTypes[type].size;
  for (size_t i = 0; i < count; ++i) {
    encode(inputValue(seed, type, op, nranks, rank, i), type, p + i * sz);
  }
}

void expectedReduce(uint64_t seed, int type, int op, int nranks, size_t i, void* dst) {
  uint64_t acc = inputValue(seed, type, op, nranks, 0, i);
  for (int r = 1; r < nranks; ++r) {
    uint64_t v = inputValue(seed, type, op, nranks, r, i);
    switch (op) {
      case kOpProd:
        acc *= v;
        break;
      case kOpMax:
        acc = v > acc ? v : acc;
        break;
      case kOpMin:
        acc = v < acc ? v : acc;
        break;
      default:
        acc += v;
        break;
    }
  }
  // Integers divide exactly by truncation; floating avg is checked by matches().
  if (op == kOpAvg && !kTypes[type].isFloat) acc /= static_cast<uint64_t>(nranks);
  encode(acc, type, dst);
}

bool matches(int type, int op, int nranks, const void* got, const void* exp, uint64_t seed,
             size_t i) {
  const TypeInfo& t = kTypes[type];
  if (op != kOpAvg || !t.isFloat) return std::memcmp(got, exp, t.size) == 0;
  // exp holds the exact sum; the result must be within one ulp of sum/n.
  (void)seed;
  (void)i;
  double want = decode(type, exp) / nranks;
  double g = decode(type, got);
  int mant = t.expBits != 0 ? t.mantBits : (t.size == 4 ? 23 : 52);
  double ulp = want == 0 ? 0 : std::ldexp(1.0, std::ilogb(want) - mant);
  // Below the normal range the spacing is fixed; fp8 and half reach it.
  if (t.expBits != 0) {
    double minUlp = std::ldexp(1.0, 2 - (1 << (t.expBits - 1)) - mant);
    if (ulp < minUlp) ulp = minUlp;
  }
  return std::fabs(g - want) <= ulp;
}

}  // namespace ferry::perf
