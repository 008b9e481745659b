// Shared helpers for the kernel tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/reduce.h"

namespace ferry::kernels::testing {

inline constexpr DType kAllTypes[] = {
    DType::kInt8,    DType::kUint8,   DType::kInt32,   DType::kUint32,
    DType::kInt64,   DType::kUint64,  DType::kFloat16, DType::kFloat32,
    DType::kFloat64, DType::kBfloat16, DType::kFp8E4M3, DType::kFp8E5M2};
inline constexpr Op kAllOps[] = {Op::kSum, Op::kProd, Op::kMax, Op::kMin};

inline bool isIntType(DType t) { return int(t) <= int(DType::kUint64); }

using Bytes = std::vector<uint8_t>;

template <class T>
T getAt(const Bytes& b, size_t i) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
void setAt(Bytes& b, size_t i, T v) {
  std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
}

// Encodes the double v (assumed exactly representable) in type t.
inline void setValue(Bytes& buf, size_t i, DType t, double v) {
  switch (t) {
    case DType::kFloat16: setAt<uint16_t>(buf, i, floatToHalf(float(v))); break;
    case DType::kFloat32: setAt<float>(buf, i, float(v)); break;
    case DType::kFloat64: setAt<double>(buf, i, v); break;
    case DType::kBfloat16: setAt<uint16_t>(buf, i, floatToBf16(float(v))); break;
    case DType::kFp8E4M3: setAt<uint8_t>(buf, i, floatToE4m3(float(v))); break;
    case DType::kFp8E5M2: setAt<uint8_t>(buf, i, floatToE5m2(float(v))); break;
    default: ADD_FAILURE() << "setValue on non-float type " << name(t);
  }
}

// Element i of a floating buffer as double (NaN stays NaN).
inline double getValue(const Bytes& buf, size_t i, DType t) {
  switch (t) {
    case DType::kFloat16: return halfToFloat(getAt<uint16_t>(buf, i));
    case DType::kFloat32: return getAt<float>(buf, i);
    case DType::kFloat64: return getAt<double>(buf, i);
    case DType::kBfloat16: return bf16ToFloat(getAt<uint16_t>(buf, i));
    case DType::kFp8E4M3: return e4m3ToFloat(getAt<uint8_t>(buf, i));
    case DType::kFp8E5M2: return e5m2ToFloat(getAt<uint8_t>(buf, i));
    default: ADD_FAILURE() << "getValue on non-float type " << name(t); return 0;
  }
}

// Index of the first element that differs, or -1. Bit equality, except that
// float32/float64 NaNs match any NaN (their payloads are the hardware's).
inline long long firstMismatch(const Bytes& x, const Bytes& y, size_t count, DType t) {
  const size_t sz = sizeOf(t);
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(x.data() + i * sz, y.data() + i * sz, sz) == 0) continue;
    if (t == DType::kFloat32 && std::isnan(getAt<float>(x, i)) && std::isnan(getAt<float>(y, i)))
      continue;
    if (t == DType::kFloat64 && std::isnan(getAt<double>(x, i)) &&
        std::isnan(getAt<double>(y, i)))
      continue;
    return (long long)i;
  }
  return -1;
}

inline std::string hexAt(const Bytes& b, size_t i, DType t) {
  const size_t sz = sizeOf(t);
  std::string s = "0x";
  static const char* kHex = "0123456789abcdef";
  for (size_t k = sz; k-- > 0;) {
    const uint8_t v = b[i * sz + k];
    s += kHex[v >> 4];
    s += kHex[v & 15];
  }
  return s;
}

}  // namespace ferry::kernels::testing
