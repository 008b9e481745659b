// The reduction arithmetic of kernels/reduce.h, written once for the host
// and the GPU (issue 14): the CUDA kernels (reduce_kernels.cu) instantiate
// it on the device, the stand-in CUDA driver and kernels_cuda_math_test on
// the host, where the test compares it bit for bit with kernels::reduce.
//
// A third derivation of the low-precision codecs (after convert.cc's exact
// double arithmetic and simd_codec.h's vector bit tricks): scalar integer
// operations on the float32 bits, round-to-nearest-even, no library calls,
// so nvcc and g++ compile the same code. Semantics as kernels/reduce.h:
// low-precision values decode exactly to float32, the op runs in float32,
// the result rounds once; fp8 saturates; NaN results are the canonical NaN;
// Max/Min propagate a NaN in a, else pick b on ties.
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define FERRY_HD __host__ __device__ __forceinline__
#else
#define FERRY_HD inline
#endif

namespace ferry::cudamath {

FERRY_HD uint32_t bitsOf(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  return u;
#endif
}
FERRY_HD float floatOf(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}
// Index of the highest set bit of m (m != 0).
FERRY_HD int topBit(uint32_t m) {
#if defined(__CUDA_ARCH__)
  return 31 - __clz(int(m));
#else
  return 31 - __builtin_clz(m);
#endif
}

// A low-precision format: mantissa bits, exponent bias, whether the
// all-ones exponent means inf/NaN (else only the all-ones magnitude is NaN),
// saturation, the largest finite magnitude code and the canonical NaN.
struct Fmt {
  int bits, mant, bias;
  bool ieee, saturate;
  uint32_t maxCode, nanCode;
};

// v / 2^s rounded to the nearest integer, ties to even (v < 2^24).
FERRY_HD uint32_t roundShift(uint32_t v, int s) {
  if (s <= 0) return v << -s;
  if (s > 25) return 0;
  uint32_t q = v >> s, rem = v & ((1u << s) - 1), half = 1u << (s - 1);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

FERRY_HD float decode(const Fmt& f, uint32_t code) {
  const uint32_t signBit = 1u << (f.bits - 1);
  const uint32_t sign = (code & signBit) ? 0x80000000u : 0u;
  const uint32_t mag = code & (signBit - 1);
  const uint32_t expOnes = (1u << (f.bits - 1 - f.mant)) - 1;
  const uint32_t e = mag >> f.mant, m = mag & ((1u << f.mant) - 1);
  if (f.ieee ? e == expOnes : mag == signBit - 1) {
    if (f.ieee && m == 0) return floatOf(sign | 0x7F800000u);
    return floatOf(sign | 0x7FC00000u | (m << (23 - f.mant)));  // quiet, payload kept
  }
  if (e != 0) return floatOf(sign | ((e - f.bias + 127) << 23) | (m << (23 - f.mant)));
  if (m == 0) return floatOf(sign);
  int p = topBit(m);  // leading bit of the subnormal's mantissa
  int biased = p + 1 - f.bias - f.mant + 127;
  if (biased >= 1) return floatOf(sign | (uint32_t(biased) << 23) | ((m - (1u << p)) << (23 - p)));
  return floatOf(sign | (m << (1 - f.bias - f.mant + 149)));  // a float32 subnormal (bf16)
}

FERRY_HD uint32_t encode(const Fmt& f, float x) {
  const uint32_t u = bitsOf(x);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return f.nanCode;
  const uint32_t sign = (u >> 31) ? (1u << (f.bits - 1)) : 0u;
  const uint32_t expOnes = (1u << (f.bits - 1 - f.mant)) - 1;
  const uint32_t overflow = sign | (f.saturate ? f.maxCode : expOnes << f.mant);
  if (abs == 0x7F800000u) return overflow;
  const int e32 = int(abs >> 23);
  const uint32_t full = e32 ? ((abs & 0x7FFFFFu) | 0x800000u) : (abs & 0x7FFFFFu);
  const int ee = (e32 ? e32 - 127 : -126) - 23;  // x = full * 2^ee
  const int et = (e32 ? e32 - 127 : -126) + f.bias;  // target biased exponent if normal
  uint32_t code;
  if (e32 && et >= 1) {
    uint32_t r = roundShift(full, 23 - f.mant);  // in [2^mant, 2^(mant+1)]
    int eo = et;
    if (r == (2u << f.mant)) {
      r >>= 1;
      ++eo;
    }
    code = (uint32_t(eo) << f.mant) | (r - (1u << f.mant));
  } else {
    // Subnormal in the target: x / 2^(1 - bias - mant), rounded (it may
    // round up to the smallest normal, whose code is the same integer).
    code = roundShift(full, (1 - f.bias - f.mant) - ee);
  }
  const bool tooBig = f.ieee ? (code >> f.mant) >= expOnes : code > f.maxCode;
  return tooBig ? overflow : sign | code;
}

enum OpCode { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };

template <class C>
FERRY_HD C fop(C a, C b, int op) {
  switch (op) {
    case kSum: return a + b;
    case kProd: return a * b;
    case kMax: return (a != a) ? a : (a > b ? a : b);
    default: return (a != a) ? a : (a < b ? a : b);
  }
}

// Integers wrap (unsigned arithmetic); Max/Min compare in the type.
template <class T, class U>
FERRY_HD T iop(T a, T b, int op) {
  switch (op) {
    case kSum: return T(U(a) + U(b));
    case kProd: return T(U(a) * U(b));
    case kMax: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}

// Each type's arithmetic: apply() for the reductions, and for Avg's final
// division (kernels::divide) the value in its compute type C (dec/enc)
// and the division by a rank count.
template <class T, class U>
struct IntT {
  using S = T;
  using C = T;
  static FERRY_HD S apply(S a, S b, int op) { return iop<T, U>(a, b, op); }
  static FERRY_HD C dec(S x) { return x; }
  static FERRY_HD S enc(C x) { return x; }
  // Truncating (signed: toward zero), n >= 1.
  static FERRY_HD C div(C x, uint64_t n) {
    if (T(-1) > T(0)) return C(uint64_t(x) / n);
    const int64_t v = int64_t(x);
    if (n > uint64_t(INT64_MAX)) return C(v == INT64_MIN && n == (uint64_t(1) << 63) ? -1 : 0);
    return C(v / int64_t(n));
  }
};
template <class F>
struct FloatT {
  using S = F;
  using C = F;
  static FERRY_HD S apply(S a, S b, int op) { return fop<F>(a, b, op); }
  static FERRY_HD C dec(S x) { return x; }
  static FERRY_HD S enc(C x) { return x; }
  static FERRY_HD C div(C x, uint64_t n) { return x / C(n); }
};
// The format as template arguments: a device function builds it locally
// (a host constexpr object would not be usable in device code).
template <class St, int Bits, int Mant, int Bias, bool Ieee, bool Sat, uint32_t MaxCode, uint32_t NanCode>
struct LowpT {
  using S = St;
  static FERRY_HD Fmt fmt() { return Fmt{Bits, Mant, Bias, Ieee, Sat, MaxCode, NanCode}; }
  static FERRY_HD S apply(S a, S b, int op) {
    const Fmt f = fmt();
    return S(encode(f, fop<float>(decode(f, a), decode(f, b), op)));
  }
  using C = float;
  static FERRY_HD C dec(S x) { return decode(fmt(), x); }
  static FERRY_HD S enc(C x) { return S(encode(fmt(), x)); }
  static FERRY_HD C div(C x, uint64_t n) { return x / float(n); }
};

// ncclDataType_t order (kernels::DType): the element type of each.
using Int8 = IntT<int8_t, uint8_t>;
using Uint8 = IntT<uint8_t, uint8_t>;
using Int32 = IntT<int32_t, uint32_t>;
using Uint32 = IntT<uint32_t, uint32_t>;
using Int64 = IntT<int64_t, uint64_t>;
using Uint64 = IntT<uint64_t, uint64_t>;
using Half = LowpT<uint16_t, 16, 10, 15, true, false, 0x7BFF, 0x7E00>;
using Float32 = FloatT<float>;
using Float64 = FloatT<double>;
using Bf16 = LowpT<uint16_t, 16, 7, 127, true, false, 0x7F7F, 0x7FC0>;
using E4m3 = LowpT<uint8_t, 8, 3, 7, false, true, 0x7E, 0x7F>;
using E5m2 = LowpT<uint8_t, 8, 2, 15, true, true, 0x7B, 0x7F>;

// dst[i] = a[i] op b[i] for i in [begin, end) stepping by `step`: the body
// of one GPU thread's grid-stride loop, or the whole loop on the host.
template <class A>
FERRY_HD void reduceRange(void* dst, const void* a, const void* b, uint64_t begin, uint64_t end,
                          uint64_t step, int op) {
  using S = typename A::S;
  auto* d = static_cast<S*>(dst);
  auto* x = static_cast<const S*>(a);
  auto* y = static_cast<const S*>(b);
  for (uint64_t i = begin; i < end; i += step) d[i] = A::apply(x[i], y[i], op);
}

// dst[i] = src[i] / n (Avg's final values; n == 0 copies).
template <class A>
FERRY_HD void divideRange(void* dst, const void* src, uint64_t begin, uint64_t end, uint64_t step, uint64_t n) {
  using S = typename A::S;
  auto* d = static_cast<S*>(dst);
  auto* x = static_cast<const S*>(src);
  for (uint64_t i = begin; i < end; i += step) d[i] = n == 0 ? x[i] : A::enc(A::div(A::dec(x[i]), n));
}

// The kernels' names, one per dtype (the op is an argument):
// ferry_reduce_<name>(dst, a, b, count, op),
// ferry_divide_<name>(dst, src, count, n).
#define FERRY_CUDA_REDUCE_TYPES(X) \
  X(int8, Int8) X(uint8, Uint8) X(int32, Int32) X(uint32, Uint32) X(int64, Int64) X(uint64, Uint64) \
  X(float16, Half) X(float32, Float32) X(float64, Float64) X(bfloat16, Bf16) X(fp8e4m3, E4m3) \
  X(fp8e5m2, E5m2)

}  // namespace ferry::cudamath
