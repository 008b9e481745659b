// Scalar conversions between float32 and the low-precision storage types.
//
// Written on purpose in a different way from the vector codecs
// (simd_codec.h, integer bit tricks): here the value is rounded with exact
// double arithmetic (scale by a power of two, round the quotient to the
// nearest even integer). The reference kernels use these functions, so the
// vector-vs-reference tests compare two independent derivations.
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/reduce.h"

namespace ferry::kernels {
namespace {

struct Format {
  int bits;          // total bits
  int mant;          // mantissa bits
  int bias;          // exponent bias
  bool ieee;         // all-ones exponent = inf/NaN (else only all-ones magnitude = NaN)
  bool saturate;     // overflow -> largest finite (else -> inf)
  uint32_t maxCode;  // largest finite magnitude code
  uint32_t nanCode;  // canonical NaN we store
};

constexpr Format kHalf{16, 10, 15, true, false, 0x7BFF, 0x7E00};
constexpr Format kBf16{16, 7, 127, true, false, 0x7F7F, 0x7FC0};
constexpr Format kE4m3{8, 3, 7, false, true, 0x7E, 0x7F};
constexpr Format kE5m2{8, 2, 15, true, true, 0x7B, 0x7F};

uint32_t signBit(const Format& f) { return 1u << (f.bits - 1); }
uint32_t expAllOnes(const Format& f) { return (1u << (f.bits - 1 - f.mant)) - 1; }

float decode(const Format& f, uint32_t code) {
  const bool neg = (code & signBit(f)) != 0;
  const uint32_t mag = code & (signBit(f) - 1);
  const uint32_t e = mag >> f.mant;
  const uint32_t m = mag & ((1u << f.mant) - 1);
  const bool special = f.ieee ? e == expAllOnes(f) : mag == signBit(f) - 1;
  if (special) {
    if (f.ieee && m == 0) return neg ? -INFINITY : INFINITY;
    // Quiet NaN keeping sign and payload, as F16C's vcvtph2ps does.
    const uint32_t bits = (neg ? 0x80000000u : 0u) | 0x7FC00000u | (m << (23 - f.mant));
    return std::bit_cast<float>(bits);
  }
  const double v = e == 0 ? std::ldexp(double(m), 1 - f.bias - f.mant)
                          : std::ldexp(double((1u << f.mant) | m), int(e) - f.bias - f.mant);
  return float(neg ? -v : v);
}

uint32_t encode(const Format& f, float x) {
  if (std::isnan(x)) return f.nanCode;
  const uint32_t sign = std::signbit(x) ? signBit(f) : 0u;
  const double a = std::fabs(double(x));
  const double maxValue = std::fabs(double(decode(f, f.maxCode)));
  // Quantum (value of one mantissa step) at a's binade, never below the
  // subnormal step 2^(emin - mant).
  const int emin = 1 - f.bias;
  int e = emin;
  if (a >= std::ldexp(1.0, emin)) {
    std::frexp(a, &e);  // a = [0.5, 1) * 2^e
    e -= 1;
  }
  const double quantum = std::ldexp(1.0, e - f.mant);
  const double n = a / quantum;  // exact: power-of-two scaling
  double r = std::floor(n);
  const double frac = n - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  const double v = r * quantum;
  if (!(v <= maxValue)) {  // also a == inf
    return sign | (f.saturate ? f.maxCode : expAllOnes(f) << f.mant);
  }
  if (v < std::ldexp(1.0, emin)) return sign | uint32_t(r);  // subnormal (or zero)
  int ev = 0;
  std::frexp(v, &ev);
  ev -= 1;
  const uint32_t m = uint32_t(std::ldexp(v, f.mant - ev)) - (1u << f.mant);
  return sign | (uint32_t(ev + f.bias) << f.mant) | m;
}

}  // namespace

float halfToFloat(uint16_t h) { return decode(kHalf, h); }
uint16_t floatToHalf(float f) { return uint16_t(encode(kHalf, f)); }
float bf16ToFloat(uint16_t h) { return decode(kBf16, h); }
uint16_t floatToBf16(float f) { return uint16_t(encode(kBf16, f)); }
float e4m3ToFloat(uint8_t v) { return decode(kE4m3, v); }
uint8_t floatToE4m3(float f) { return uint8_t(encode(kE4m3, f)); }
float e5m2ToFloat(uint8_t v) { return decode(kE5m2, v); }
uint8_t floatToE5m2(float f) { return uint8_t(encode(kE5m2, f)); }

}  // namespace ferry::kernels
