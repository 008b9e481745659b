// Internal, included only by isa_*.cc after simd_codec.h: the kernel
// templates and the table that points at their instantiations.
//
// A kernel is a loop over blocks of one register's worth of elements: load
// the raw block(s), decode to a compute register, apply the op, encode, store.
// Each block is fully loaded before it is stored, so dst may be a or b. The
// tail is run through the same block code on zero-padded copies, so there is
// no second (scalar) code path whose results could differ.
#pragma once

#include <type_traits>

#include "kernels/dispatch.h"
#include "kernels/simd_codec.h"

namespace ferry::kernels {
namespace {

// Max/Min for floating registers: NaN in a propagates; a NaN in b falls out
// of the compare (false) and so is selected too. The inner select is
// exactly x86 MAXPS/MINPS, which GCC emits for it.
template <class R>
[[gnu::always_inline]] inline R fmaxV(R a, R b) {
  const R m = a > b ? a : b;
  return a != a ? a : m;
}
template <class R>
[[gnu::always_inline]] inline R fminV(R a, R b) {
  const R m = a < b ? a : b;
  return a != a ? a : m;
}

template <class T>
struct IntTraits {
  using Elem = T;
  static constexpr size_t kLanes = kVecBytes / sizeof(T);
  using Raw = VecN<T, kLanes>;
  using Reg = Raw;
  using URaw = VecN<std::make_unsigned_t<T>, kLanes>;  // wrapping arithmetic
  static Reg decode(Raw r) { return r; }
  static Raw encode(Reg r) { return r; }
  static Reg add(Reg a, Reg b) { return (Reg)((URaw)a + (URaw)b); }
  static Reg mul(Reg a, Reg b) { return (Reg)((URaw)a * (URaw)b); }
  static Reg max(Reg a, Reg b) { return a > b ? a : b; }
  static Reg min(Reg a, Reg b) { return a < b ? a : b; }
  static Reg scalar(const Scalar& s) {
    return splat<Reg>(std::is_signed_v<T> ? static_cast<T>(s.i) : static_cast<T>(s.u));
  }
};

template <class T>
struct FloatTraits {
  using Elem = T;
  static constexpr size_t kLanes = kVecBytes / sizeof(T);
  using Raw = VecN<T, kLanes>;
  using Reg = Raw;
  static Reg decode(Raw r) { return r; }
  static Raw encode(Reg r) { return r; }
  static Reg add(Reg a, Reg b) { return a + b; }
  static Reg mul(Reg a, Reg b) { return a * b; }
  static Reg max(Reg a, Reg b) { return fmaxV(a, b); }
  static Reg min(Reg a, Reg b) { return fminV(a, b); }
  static Reg scalar(const Scalar& s) { return splat<Reg>(static_cast<T>(s.f)); }
  static Reg divisor(uint64_t n) { return splat<Reg>(static_cast<T>(n)); }
};

// float16/bfloat16/fp8: compute in float32, one rounding per step.
template <class Codec>
struct LowpTraits {
  using Elem = typename Codec::Storage;
  static constexpr size_t kLanes = kF32Lanes;
  using Raw = typename Codec::Raw;
  using Reg = F32v;
  static Reg decode(Raw r) { return Codec::decode(r); }
  static Raw encode(Reg r) { return Codec::encode(r); }
  static Reg add(Reg a, Reg b) { return a + b; }
  static Reg mul(Reg a, Reg b) { return a * b; }
  static Reg max(Reg a, Reg b) { return fmaxV(a, b); }
  static Reg min(Reg a, Reg b) { return fminV(a, b); }
  static Reg scalar(const Scalar& s) { return splat<Reg>(static_cast<float>(s.f)); }
  static Reg divisor(uint64_t n) { return splat<Reg>(static_cast<float>(n)); }
};

// Integer division in floating point C: when |x| < 2^(mantissa bits of C)
// the correctly rounded quotient truncates to the exact integer quotient
// (for any n: a rounded n beyond |x| still gives 0). So C = double is exact
// for 32-bit types, C = float for 8-bit ones.
template <class T, class C>
struct IntDivTraits {
  using Elem = T;
  static constexpr size_t kLanes = kVecBytes / sizeof(C);
  using Raw = VecN<T, kLanes>;
  using Reg = VecN<C, kLanes>;
  // 8-bit lanes go through int16/int32 one doubling at a time: GCC 12
  // scalarizes wider single-step conversions.
  using I16 = VecN<int16_t, kLanes>;
  using I32 = VecN<int32_t, kLanes>;
  static Reg decode(Raw r) {
    if constexpr (sizeof(T) == 1) {
      return __builtin_convertvector(
          __builtin_convertvector(__builtin_convertvector(r, I16), I32), Reg);
    } else {
      return __builtin_convertvector(r, Reg);
    }
  }
  static Raw encode(Reg r) {
    if constexpr (sizeof(T) == 1) {
      return __builtin_convertvector(
          __builtin_convertvector(__builtin_convertvector(r, I32), I16), Raw);
    } else {
      return __builtin_convertvector(r, Raw);
    }
  }
  static Reg divisor(uint64_t n) { return splat<Reg>(static_cast<C>(n)); }
};

template <class Tr, Op kOp>
[[gnu::always_inline]] inline typename Tr::Reg apply(typename Tr::Reg a, typename Tr::Reg b) {
  if constexpr (kOp == Op::kSum) return Tr::add(a, b);
  if constexpr (kOp == Op::kProd) return Tr::mul(a, b);
  if constexpr (kOp == Op::kMax) return Tr::max(a, b);
  if constexpr (kOp == Op::kMin) return Tr::min(a, b);
}

// out = f(x, y) for two inputs, stored to d and (kTwo) d2.
template <class Tr, bool kTwo, class F>
[[gnu::always_inline]] inline void run2(void* d, void* d2, const void* x, const void* y,
                                        size_t n, F f) {
  using E = typename Tr::Elem;
  using Raw = typename Tr::Raw;
  constexpr size_t kL = Tr::kLanes;
  E* dp = static_cast<E*>(d);
  E* dp2 = static_cast<E*>(d2);
  const E* xp = static_cast<const E*>(x);
  const E* yp = static_cast<const E*>(y);
  size_t i = 0;
  for (; i + kL <= n; i += kL) {
    const Raw r = f(loadV<Raw>(xp + i), loadV<Raw>(yp + i));
    storeV(dp + i, r);
    if constexpr (kTwo) storeV(dp2 + i, r);
  }
  if (i == n) return;
  const size_t bytes = (n - i) * sizeof(E);
  Raw tx{}, ty{};
  __builtin_memcpy(&tx, xp + i, bytes);
  __builtin_memcpy(&ty, yp + i, bytes);
  const Raw r = f(tx, ty);
  __builtin_memcpy(dp + i, &r, bytes);
  if constexpr (kTwo) __builtin_memcpy(dp2 + i, &r, bytes);
}

// out = f(x) for one input.
template <class Tr, class F>
[[gnu::always_inline]] inline void run1(void* d, const void* x, size_t n, F f) {
  using E = typename Tr::Elem;
  using Raw = typename Tr::Raw;
  constexpr size_t kL = Tr::kLanes;
  E* dp = static_cast<E*>(d);
  const E* xp = static_cast<const E*>(x);
  size_t i = 0;
  for (; i + kL <= n; i += kL) storeV(dp + i, f(loadV<Raw>(xp + i)));
  if (i == n) return;
  const size_t bytes = (n - i) * sizeof(E);
  Raw tx{};
  __builtin_memcpy(&tx, xp + i, bytes);
  const Raw r = f(tx);
  __builtin_memcpy(dp + i, &r, bytes);
}

template <class Tr, Op kOp>
void reduceKernel(void* d, void* d2, const void* a, const void* b, size_t n) {
  auto f = [](typename Tr::Raw x, typename Tr::Raw y) {
    return Tr::encode(apply<Tr, kOp>(Tr::decode(x), Tr::decode(y)));
  };
  if (d2 != nullptr) {
    run2<Tr, true>(d, d2, a, b, n, f);
  } else {
    run2<Tr, false>(d, d2, a, b, n, f);
  }
}

template <class Tr>
void reduceScaledKernel(void* d, void* d2, const void* a, const void* b, size_t n,
                        const Scalar& s) {
  const typename Tr::Reg sv = Tr::scalar(s);
  // The product is rounded to the storage type before the add, exactly as
  // scale() rounds it when this rank's input is sent instead: whichever rank
  // folds an input in, every rank then sees the same bits.
  auto f = [sv](typename Tr::Raw x, typename Tr::Raw y) {
    return Tr::encode(Tr::add(Tr::decode(x), Tr::decode(Tr::encode(Tr::mul(Tr::decode(y), sv)))));
  };
  if (d2 != nullptr) {
    run2<Tr, true>(d, d2, a, b, n, f);
  } else {
    run2<Tr, false>(d, d2, a, b, n, f);
  }
}

template <class Tr>
void scaleKernel(void* d, const void* src, size_t n, const Scalar& s) {
  const typename Tr::Reg sv = Tr::scalar(s);
  run1<Tr>(d, src, n,
           [sv](typename Tr::Raw x) { return Tr::encode(Tr::mul(Tr::decode(x), sv)); });
}

template <class Tr>
void divideKernel(void* d, const void* src, size_t n, uint64_t den) {
  const typename Tr::Reg dv = Tr::divisor(den);
  run1<Tr>(d, src, n, [dv](typename Tr::Raw x) { return Tr::encode(Tr::decode(x) / dv); });
}

// 64-bit integers: no exact vector division; the magnitude is divided in
// unsigned arithmetic so INT64_MIN and any n are exact.
template <class T>
void divide64Kernel(void* d, const void* src, size_t n, uint64_t den) {
  T* dp = static_cast<T*>(d);
  const T* sp = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) {
    const T x = sp[i];
    if constexpr (std::is_signed_v<T>) {
      const uint64_t mag = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
      const uint64_t q = mag / den;
      dp[i] = static_cast<T>(x < 0 ? 0 - q : q);
    } else {
      dp[i] = x / den;
    }
  }
}

template <class Tr>
constexpr void fillType(detail::KernelTable& t, DType dt) {
  const int k = static_cast<int>(dt);
  t.reduce[k][0] = &reduceKernel<Tr, Op::kSum>;
  t.reduce[k][1] = &reduceKernel<Tr, Op::kProd>;
  t.reduce[k][2] = &reduceKernel<Tr, Op::kMax>;
  t.reduce[k][3] = &reduceKernel<Tr, Op::kMin>;
  t.reduceScaled[k] = &reduceScaledKernel<Tr>;
  t.scale[k] = &scaleKernel<Tr>;
}

constexpr detail::KernelTable buildTable() {
  detail::KernelTable t{};
  fillType<IntTraits<int8_t>>(t, DType::kInt8);
  fillType<IntTraits<uint8_t>>(t, DType::kUint8);
  fillType<IntTraits<int32_t>>(t, DType::kInt32);
  fillType<IntTraits<uint32_t>>(t, DType::kUint32);
  fillType<IntTraits<int64_t>>(t, DType::kInt64);
  fillType<IntTraits<uint64_t>>(t, DType::kUint64);
  fillType<LowpTraits<HalfCodec>>(t, DType::kFloat16);
  fillType<FloatTraits<float>>(t, DType::kFloat32);
  fillType<FloatTraits<double>>(t, DType::kFloat64);
  fillType<LowpTraits<Bf16Codec>>(t, DType::kBfloat16);
  fillType<LowpTraits<Fp8Codec<E4m3Fmt>>>(t, DType::kFp8E4M3);
  fillType<LowpTraits<Fp8Codec<E5m2Fmt>>>(t, DType::kFp8E5M2);
  t.divide[int(DType::kInt8)] = &divideKernel<IntDivTraits<int8_t, float>>;
  t.divide[int(DType::kUint8)] = &divideKernel<IntDivTraits<uint8_t, float>>;
  t.divide[int(DType::kInt32)] = &divideKernel<IntDivTraits<int32_t, double>>;
  t.divide[int(DType::kUint32)] = &divideKernel<IntDivTraits<uint32_t, double>>;
  t.divide[int(DType::kInt64)] = &divide64Kernel<int64_t>;
  t.divide[int(DType::kUint64)] = &divide64Kernel<uint64_t>;
  t.divide[int(DType::kFloat16)] = &divideKernel<LowpTraits<HalfCodec>>;
  t.divide[int(DType::kFloat32)] = &divideKernel<FloatTraits<float>>;
  t.divide[int(DType::kFloat64)] = &divideKernel<FloatTraits<double>>;
  t.divide[int(DType::kBfloat16)] = &divideKernel<LowpTraits<Bf16Codec>>;
  t.divide[int(DType::kFp8E4M3)] = &divideKernel<LowpTraits<Fp8Codec<E4m3Fmt>>>;
  t.divide[int(DType::kFp8E5M2)] = &divideKernel<LowpTraits<Fp8Codec<E5m2Fmt>>>;
  return t;
}

}  // namespace
}  // namespace ferry::kernels
