// Reduction kernels on host memory: the arithmetic every collective uses.
//
// Semantics (quoted by the README):
//
// * Integer types (int8/uint8/int32/uint32/int64/uint64): Sum and Prod wrap
//   modulo 2^bits (computed in unsigned arithmetic, no UB); Max/Min compare
//   as signed or unsigned per the type. A PreMulSum scalar multiplies in the
//   integer type (wrapping). divide() truncates (signed: toward zero).
// * float32 / float64: native IEEE arithmetic in that type, one rounding per
//   operation (never fused: a + b*s is a rounded product, then a rounded sum).
//   The scalar is used as float32 for float32 and as double for float64.
// * Low-precision types (float16, bfloat16, fp8 e4m3, fp8 e5m2): every
//   pairwise step decodes both operands exactly to float32, applies the op
//   (and the scalar, as float32) in float32, and rounds the result once to
//   the storage type, round-to-nearest-even. divide() is float32(x)/float32(n)
//   rounded once. The vector and scalar code paths give bit-identical results.
//     - float16: IEEE binary16; overflow rounds to +-inf.
//     - bfloat16: overflow rounds to +-inf.
//     - fp8 e4m3 (max 448, no infinity) and e5m2 (max 57344): saturating, like
//       CUDA's __NV_SATFINITE: any result beyond the largest finite value,
//       including +-inf, becomes +-max finite. So an e5m2 infinity entering a
//       reduction leaves it as +-57344.
//     - A NaN result is stored as the type's canonical quiet NaN, whatever the
//       operands' NaN payloads or signs: float16 0x7E00, bfloat16 0x7FC0,
//       e4m3 0x7F, e5m2 0x7F, so a NaN result does not depend on which
//       operand carried which NaN (nor on the operand order).
// * Max/Min on floating types: NaN propagates. max(a, b) is a if a is NaN,
//   else (a > b ? a : b); min likewise with <. When a and b compare equal
//   (e.g. -0 and +0) the result is b. For float32/float64 a NaN result of
//   Sum/Prod is some quiet NaN (payload as the hardware gives it).
// * Aliasing: dst may be the same pointer as a or b (or src); partial
//   overlap is not allowed. dst2 is a separate buffer or nullptr.
// * Floating-point environment: results assume the default one (round to
//   nearest, no FTZ/DAZ). The conversions never depend on it; the float32/
//   float64 arithmetic follows it like any other code in the thread.
// * Kernels are vectorized (AVX-512 or AVX2+F16C, picked at run time from
//   the CPU; plain x86-64 otherwise). Results do not depend on which is used.
// * Preconditions (not checked beyond ignoring out-of-range enums): t and op
//   are valid values, buffers hold count elements, divide's n >= 1
//   (n == 0 copies src).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::kernels {

// Values equal ncclDataType_t's (int8=0 ... fp8 e5m2=11).
enum class DType : int {
  kInt8 = 0, kUint8, kInt32, kUint32, kInt64, kUint64, kFloat16, kFloat32,
  kFloat64, kBfloat16, kFp8E4M3, kFp8E5M2, kCount
};
// Avg and PreMulSum are built from these plus scale()/divide()/reduceScaled().
enum class Op : int { kSum = 0, kProd, kMax, kMin };
inline constexpr int kNumDTypes = static_cast<int>(DType::kCount);
inline constexpr int kNumOps = 4;

// 0 for an invalid type. Inline: every call checks its count with it.
inline size_t sizeOf(DType t) {
  static constexpr size_t kSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};  // static: not rebuilt on the stack per call
  static_assert(sizeof(kSizes) / sizeof(kSizes[0]) == kNumDTypes);
  auto i = static_cast<unsigned>(t);
  return i < static_cast<unsigned>(kNumDTypes) ? kSizes[i] : 0;
}
const char* name(DType t);   // "int8", "float16", "bfloat16", "fp8e4m3", ... ("invalid")
const char* name(Op op);     // "sum", "prod", "max", "min"

// A PreMulSum scalar, decoded once from the user's bytes of type t.
// Signed integer types set i (and u = i as two's complement, f = i);
// unsigned set u (i = u, f = u); floating types set only f (exact value).
struct Scalar {
  DType type;
  double f = 0;
  int64_t i = 0;
  uint64_t u = 0;
};
Scalar scalarFromBytes(DType t, const void* bytes);

// dst[i] = a[i] OP b[i] for i < count. dst may alias a or b exactly.
void reduce(void* dst, const void* a, const void* b, size_t count, DType t, Op op);
// Same, also storing the result to dst2 in the same pass (dst2 may be nullptr).
void reduce2(void* dst, void* dst2, const void* a, const void* b, size_t count, DType t,
             Op op);
// PreMulSum step: dst[i] = a[i] + round(b[i]*s) (b is this rank's own input;
// the product is rounded to the storage type as scale() rounds it, so a rank
// folding its own input in gets the bits its peers get from the sent,
// scaled input). dst2 as above.
void reduceScaled(void* dst, void* dst2, const void* a, const void* b, size_t count, DType t,
                  const Scalar& s);
// dst[i] = src[i]*s (dst may alias src).
void scale(void* dst, const void* src, size_t count, DType t, const Scalar& s);
// dst[i] = src[i] / n: Avg's final step. Integers: truncating division
// (signed: toward zero).
void divide(void* dst, const void* src, size_t count, DType t, uint64_t n);

// Scalar conversions (round to nearest even; NaN and overflow as above).
// Decoding is exact; a NaN decodes to a quiet NaN keeping sign and payload.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);
float e4m3ToFloat(uint8_t v);
uint8_t floatToE4m3(float f);
float e5m2ToFloat(uint8_t v);
uint8_t floatToE5m2(float f);

}  // namespace ferry::kernels
