// Internal, included only by isa_*.cc: vector types of the TU's native width
// and the low-precision <-> float32 codecs on them.
//
// Everything here has internal linkage (anonymous namespace) on purpose: the
// same code is compiled with different -m flags in each isa_*.cc, and a
// shared inline symbol would let the linker keep the AVX-512 copy for all.
// For the same reason this file calls no std:: functions, only builtins and
// intrinsics (which are always inlined).
//
// The codecs are exact: integer bit manipulation, F16C conversions with the
// rounding given in the instruction, exact scalings by powers of two. They do
// not depend on MXCSR's rounding mode or DAZ/FTZ (the float32 arithmetic of
// the ops themselves does, as any float code would).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

// GCC 12 warns inside its own _mm512_undefined_*() (self-initialised on
// purpose) once the conversions are inlined here; the warning is spurious.
// (Clang has no such warning and would warn about the unknown name.)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The width the GCC vector extensions below map onto one register. Wider
// generic vectors make GCC split VEC_COND_EXPRs into scalar code.
#if defined(__AVX512F__)
#define FERRY_VEC_BYTES 64
#elif defined(__AVX2__)
#define FERRY_VEC_BYTES 32
#else
#define FERRY_VEC_BYTES 16
#endif
#if FERRY_VEC_BYTES >= 32 && !defined(__F16C__)
#error "the AVX2/AVX-512 kernel files are built with -mf16c"
#endif

namespace ferry::kernels {
namespace {

template <class T, size_t N>
using VecN [[gnu::vector_size(sizeof(T) * N)]] = T;

inline constexpr size_t kVecBytes = FERRY_VEC_BYTES;
inline constexpr size_t kF32Lanes = kVecBytes / 4;  // lanes of the low-precision kernels

using F32v = VecN<float, kF32Lanes>;
using U32v = VecN<uint32_t, kF32Lanes>;
using I32v = VecN<int32_t, kF32Lanes>;
using U16v = VecN<uint16_t, kF32Lanes>;
using U8v = VecN<uint8_t, kF32Lanes>;

template <class V, class S>
[[gnu::always_inline]] inline V splat(S s) {
  return V{} + s;
}

template <class V>
[[gnu::always_inline]] inline V loadV(const void* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}

template <class V>
[[gnu::always_inline]] inline void storeV(void* p, V v) {
  __builtin_memcpy(p, &v, sizeof(V));
}

// Widening/narrowing between storage codes and 32-bit lanes. GCC 12 turns a
// 4x __builtin_convertvector (u8 <-> u32) into scalar code, so the x86 paths
// use the single-instruction conversions. Narrowing assumes every lane
// already fits the narrow type (codes never exceed it).
#if FERRY_VEC_BYTES == 64
[[gnu::always_inline]] inline U32v widen(U8v r) { return (U32v)_mm512_cvtepu8_epi32((__m128i)r); }
[[gnu::always_inline]] inline U32v widen(U16v r) { return (U32v)_mm512_cvtepu16_epi32((__m256i)r); }
[[gnu::always_inline]] inline U8v narrow8(U32v v) { return (U8v)_mm512_cvtepi32_epi8((__m512i)v); }
[[gnu::always_inline]] inline U16v narrow16(U32v v) {
  return (U16v)_mm512_cvtepi32_epi16((__m512i)v);
}
[[gnu::always_inline]] inline U16v widen16(U8v r) { return (U16v)_mm256_cvtepu8_epi16((__m128i)r); }
[[gnu::always_inline]] inline F32v f16ToF32(U16v h) { return (F32v)_mm512_cvtph_ps((__m256i)h); }
#elif FERRY_VEC_BYTES == 32
[[gnu::always_inline]] inline U32v widen(U8v r) {
  return (U32v)_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(__builtin_bit_cast(long long, r)));
}
[[gnu::always_inline]] inline U32v widen(U16v r) { return (U32v)_mm256_cvtepu16_epi32((__m128i)r); }
[[gnu::always_inline]] inline U16v narrow16(U32v v) {
  const __m256i x = (__m256i)v;
  return (U16v)_mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
}
[[gnu::always_inline]] inline U8v narrow8(U32v v) {
  const __m128i w = (__m128i)narrow16(v);
  return __builtin_bit_cast(U8v, _mm_cvtsi128_si64(_mm_packus_epi16(w, w)));
}
[[gnu::always_inline]] inline U16v widen16(U8v r) {
  return (U16v)_mm_cvtepu8_epi16(_mm_cvtsi64_si128(__builtin_bit_cast(long long, r)));
}
[[gnu::always_inline]] inline F32v f16ToF32(U16v h) { return (F32v)_mm256_cvtph_ps((__m128i)h); }
#else
[[gnu::always_inline]] inline U32v widen(U8v r) { return __builtin_convertvector(r, U32v); }
[[gnu::always_inline]] inline U32v widen(U16v r) { return __builtin_convertvector(r, U32v); }
[[gnu::always_inline]] inline U8v narrow8(U32v v) { return __builtin_convertvector(v, U8v); }
[[gnu::always_inline]] inline U16v narrow16(U32v v) { return __builtin_convertvector(v, U16v); }
#endif

constexpr uint32_t kF32Inf = 0x7F800000u;

// A binary float format of kBits bits: kMant mantissa bits, exponent bias
// kBias. kIeee: the all-ones exponent means inf/NaN (float16, e5m2); else
// only the all-ones magnitude is NaN (e4m3). kSat: overflow saturates to
// kMaxCode (else it rounds to inf). kNan: canonical NaN code.
template <int kBits, int kMant, int kBias, bool kIeee, bool kSat, uint32_t kMaxCode,
          uint32_t kNan>
struct SmallFloat {
  static constexpr int kMantBits = kMant;
  static constexpr int kBiasValue = kBias;
  static constexpr bool kHasInf = kIeee;
  static constexpr uint32_t kSign = 1u << (kBits - 1);
  static constexpr int kShift = 23 - kMant;
  static constexpr uint32_t kExpAll = (1u << (kBits - 1 - kMant)) - 1;
  static constexpr uint32_t kRebias = uint32_t(127 - kBias) << 23;
  static constexpr uint32_t kMinNormal = uint32_t(128 - kBias) << 23;  // float bits
  // A subnormal code m is worth m * 2^(1 - kBias - kMant).
  static constexpr float kSubUnit =
      __builtin_bit_cast(float, uint32_t(127 + 1 - kBias - kMant) << 23);
  // Float bits of the largest finite value.
  static constexpr uint32_t kMaxBits = ((kMaxCode >> kMant) << 23) + kRebias +
                                       ((kMaxCode & ((1u << kMant) - 1)) << kShift);

  [[gnu::always_inline]] static F32v decode(U32v u) {
    const U32v sign = (u & kSign) << (32 - kBits);
    const U32v mag = u & (kSign - 1);
    const U32v e = mag >> kMant;
    const U32v m = mag & ((1u << kMant) - 1);
    const U32v normal = (mag << kShift) + kRebias;
    const U32v sub = (U32v)(__builtin_convertvector((I32v)m, F32v) * kSubUnit);
    U32v r = e == 0 ? sub : normal;
    if constexpr (kIeee) {
      const U32v special = (m << kShift) | ((U32v)(m != 0) & 0x400000u) | kF32Inf;
      r = e == kExpAll ? special : r;
    } else {
      const U32v nan = (m << kShift) | 0x7FC00000u;
      r = mag == (kSign - 1) ? nan : r;
    }
    return (F32v)(r | sign);
  }

  // For lanes below the smallest normal: |x| / kSubUnit rounded to the
  // nearest even integer (other lanes: don't care).
  [[gnu::always_inline]] static U32v subnormalSteps(U32v a) {
#if FERRY_VEC_BYTES >= 32
    // Exact scaling, then a rounding whose mode is in the instruction (not
    // MXCSR's). A float32 subnormal (flushed or not by DAZ) gives 0 either way.
    const F32v y = (F32v)a * (1.0f / kSubUnit);
#if FERRY_VEC_BYTES == 64
    const F32v r = (F32v)_mm512_roundscale_ps((__m512)y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    const F32v r = (F32v)_mm256_round_ps((__m256)y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#endif
    return (U32v)__builtin_convertvector(r, I32v);
#else
    // SSE2 has no rounding instruction: shift the mantissa (with its
    // implicit bit) by a per-lane amount, clamped to [1, 31] (31 gives 0).
    I32v sh = (kShift + 128 - kBias) - (I32v)(a >> 23);
    sh = sh > 31 ? splat<I32v>(31) : sh;
    sh = sh < 1 ? splat<I32v>(1) : sh;
    const U32v ush = (U32v)sh;
    const U32v mant = (a & 0x7FFFFFu) | 0x800000u;
    return (mant + ((splat<U32v>(1) << (ush - 1)) - 1) + ((mant >> ush) & 1)) >> ush;
#endif
  }

  // Round to nearest even. Normal range: drop kShift bits of the rebiased
  // float in integers. Subnormal range: count subnormal steps, rounded.
  [[gnu::always_inline]] static U32v encode(F32v f) {
    const U32v u = (U32v)f;
    const U32v sign = u & 0x80000000u;
    const U32v a = u ^ sign;
    const I32v ai = (I32v)a;
    const U32v nb = a - kRebias;
    const U32v nq = (nb + ((1u << (kShift - 1)) - 1) + ((nb >> kShift) & 1)) >> kShift;
    const U32v sq = subnormalSteps(a);
    U32v q = ai < (int32_t)kMinNormal ? sq : nq;
    if constexpr (kSat) {
      q = ai > (int32_t)kMaxBits ? splat<U32v>(kMaxCode) : q;
    } else {
      // Rounding past the largest finite value (and any a >= inf) lands at
      // or above the inf code.
      constexpr uint32_t kInfCode = kExpAll << kMant;
      q = q > kInfCode ? splat<U32v>(kInfCode) : q;
    }
    q |= sign >> (32 - kBits);
    return ai > (int32_t)kF32Inf ? splat<U32v>(kNan) : q;
  }
};

using E4m3Fmt = SmallFloat<8, 3, 7, false, true, 0x7E, 0x7F>;
using E5m2Fmt = SmallFloat<8, 2, 15, true, true, 0x7B, 0x7F>;
using HalfFmt = SmallFloat<16, 10, 15, true, false, 0x7BFF, 0x7E00>;

// Codecs: Storage is the element type, Raw a vector of kF32Lanes of them.
template <class Fmt>
struct Fp8Codec {
  using Storage = uint8_t;
  using Raw = U8v;
#if FERRY_VEC_BYTES >= 32
  // Through F16C: an fp8 code moved into float16 bit positions is the same
  // value scaled by 2^(15 - bias) (exact, subnormals included); e5m2 shares
  // float16's bias, so it is just the top byte of a half.
  [[gnu::always_inline]] static F32v decode(Raw r) {
    const U16v w = widen16(r);
    if constexpr (Fmt::kBiasValue == 15 && Fmt::kMantBits == 2) return f16ToF32(w << 8);
    U16v h = ((w & 0x7F) << (10 - Fmt::kMantBits)) | ((w & 0x80) << 8);
    if constexpr (!Fmt::kHasInf) h = (w & 0x7F) == 0x7F ? splat<U16v>(uint16_t(0x7E00)) : h;
    const F32v f = f16ToF32(h);
    constexpr float kScale = __builtin_bit_cast(float, uint32_t(127 + 15 - Fmt::kBiasValue) << 23);
    return f * kScale;
  }
#else
  [[gnu::always_inline]] static F32v decode(Raw r) { return Fmt::decode(widen(r)); }
#endif
  [[gnu::always_inline]] static Raw encode(F32v f) { return narrow8(Fmt::encode(f)); }
};

struct Bf16Codec {
  using Storage = uint16_t;
  using Raw = U16v;
  [[gnu::always_inline]] static F32v decode(Raw r) {
    return (F32v)(widen(r) << 16);
  }
  [[gnu::always_inline]] static Raw encode(F32v f) {
    const U32v u = (U32v)f;
    U32v r = (u + 0x7FFFu + ((u >> 16) & 1)) >> 16;
    r = (I32v)(u & 0x7FFFFFFFu) > (int32_t)kF32Inf ? splat<U32v>(0x7FC0) : r;
    return narrow16(r);
  }
};

struct HalfCodec {
  using Storage = uint16_t;
  using Raw = U16v;
#if FERRY_VEC_BYTES == 64
  [[gnu::always_inline]] static F32v decode(Raw r) { return f16ToF32(r); }
  [[gnu::always_inline]] static Raw encode(F32v f) {
    const Raw h = (Raw)_mm512_cvtps_ph((__m512)f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return canonicalNan(f, h);
  }
#elif FERRY_VEC_BYTES == 32
  [[gnu::always_inline]] static F32v decode(Raw r) { return f16ToF32(r); }
  [[gnu::always_inline]] static Raw encode(F32v f) {
    const Raw h = (Raw)_mm256_cvtps_ph((__m256)f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return canonicalNan(f, h);
  }
#else
  [[gnu::always_inline]] static F32v decode(Raw r) { return HalfFmt::decode(widen(r)); }
  [[gnu::always_inline]] static Raw encode(F32v f) { return narrow16(HalfFmt::encode(f)); }
#endif
  // F16C keeps NaN payloads; Ferry stores one canonical NaN.
  [[gnu::always_inline]] static Raw canonicalNan(F32v f, Raw h) {
    const auto isNan = __builtin_convertvector(f != f, VecN<int16_t, kF32Lanes>);
    return isNan ? splat<Raw>(uint16_t(0x7E00)) : h;
  }
};

}  // namespace
}  // namespace ferry::kernels
