// Scalar conversions: known bit patterns, exhaustive decodes, round trips,
// and encodes checked against F16C (float16) and a brute-force nearest-value
// search (fp8).
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <limits>

#include "tests/unit/kernels/test_util.h"

namespace ferry::kernels {
namespace {

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(KernelConvert, HalfKnownPatterns) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);  // tie at the top rounds to inf
  EXPECT_EQ(floatToHalf(1e9f), 0x7C00);
  EXPECT_EQ(floatToHalf(-kInf), 0xFC00);
  EXPECT_EQ(floatToHalf(kNan), 0x7E00);
  EXPECT_EQ(floatToHalf(-kNan), 0x7E00);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);   // tie to even (0)
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002);   // tie to even (2)
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);       // tie, even
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);   // tie, even
  EXPECT_EQ(floatToHalf(0.1f), 0x2E66);
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(halfToFloat(0x7C00), kInf);
  EXPECT_EQ(halfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(std::bit_cast<uint32_t>(halfToFloat(0x7C01)), 0x7FC02000u);  // quiet, payload kept
  EXPECT_EQ(std::bit_cast<uint32_t>(halfToFloat(0xFE00)), 0xFFC00000u);
}

TEST(KernelConvert, Bf16KnownPatterns) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBf16(3.14159265f), 0x4049);
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie, even
  EXPECT_EQ(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie, even
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // overflows to inf
  EXPECT_EQ(floatToBf16(-kInf), 0xFF80);
  EXPECT_EQ(floatToBf16(kNan), 0x7FC0);
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0xFF800001u)), 0x7FC0);  // sNaN -> canonical
  EXPECT_EQ(floatToBf16(std::ldexp(1.0f, -133)), 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(floatToBf16(std::ldexp(1.0f, -149)), 0x0000);
  EXPECT_EQ(floatToBf16(-std::ldexp(3.0f, -134)), 0x8002);  // tie, even
  EXPECT_EQ(bf16ToFloat(0xC2F7), -123.5f);
  EXPECT_EQ(bf16ToFloat(0x0001), std::ldexp(1.0f, -133));
}

TEST(KernelConvert, Fp8KnownPatterns) {
  EXPECT_EQ(floatToE4m3(1.0f), 0x38);
  EXPECT_EQ(floatToE4m3(448.0f), 0x7E);
  EXPECT_EQ(floatToE4m3(464.0f), 0x7E);  // saturates
  EXPECT_EQ(floatToE4m3(1e9f), 0x7E);
  EXPECT_EQ(floatToE4m3(kInf), 0x7E);
  EXPECT_EQ(floatToE4m3(-kInf), 0xFE);
  EXPECT_EQ(floatToE4m3(kNan), 0x7F);
  EXPECT_EQ(floatToE4m3(240.0f), 0x77);
  EXPECT_EQ(floatToE4m3(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(floatToE4m3(std::ldexp(1.0f, -6)), 0x08);
  EXPECT_EQ(floatToE4m3(std::ldexp(7.0f, -9)), 0x07);
  EXPECT_EQ(floatToE4m3(std::ldexp(1.0f, -10)), 0x00);  // tie, even
  EXPECT_EQ(floatToE4m3(std::ldexp(3.0f, -10)), 0x02);  // tie, even
  EXPECT_EQ(floatToE4m3(-0.0f), 0x80);
  EXPECT_EQ(floatToE4m3(-3.0f), 0xC4);
  EXPECT_EQ(floatToE5m2(1.0f), 0x3C);
  EXPECT_EQ(floatToE5m2(57344.0f), 0x7B);
  EXPECT_EQ(floatToE5m2(61440.0f), 0x7B);
  EXPECT_EQ(floatToE5m2(1e9f), 0x7B);
  EXPECT_EQ(floatToE5m2(kInf), 0x7B);
  EXPECT_EQ(floatToE5m2(kNan), 0x7F);
  EXPECT_EQ(floatToE5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(floatToE5m2(std::ldexp(1.0f, -14)), 0x04);
  EXPECT_EQ(floatToE5m2(-2.0f), 0xC0);
  EXPECT_EQ(floatToE5m2(1.125f), 0x3C);  // tie, even
  EXPECT_EQ(floatToE5m2(1.375f), 0x3E);  // tie, even
  EXPECT_TRUE(std::isnan(e4m3ToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3ToFloat(0xFF)));
  EXPECT_EQ(e4m3ToFloat(0x7E), 448.0f);
  EXPECT_EQ(e4m3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::signbit(e4m3ToFloat(0x80)));
  EXPECT_EQ(e5m2ToFloat(0x7C), kInf);
  EXPECT_EQ(e5m2ToFloat(0xFC), -kInf);
  EXPECT_TRUE(std::isnan(e5m2ToFloat(0x7D)));
  EXPECT_EQ(e5m2ToFloat(0x7B), 57344.0f);
}

// Independent value of an fp8 code, written from the format definition.
double fp8Value(uint8_t c, int mant, int bias) {
  const int e = (c >> mant) & ((1 << (7 - mant)) - 1);
  const int m = c & ((1 << mant) - 1);
  const double mag = e == 0 ? std::ldexp(m, 1 - bias - mant)
                            : std::ldexp((1 << mant) + m, e - bias - mant);
  return (c & 0x80) ? -mag : mag;
}

TEST(KernelConvert, Fp8DecodeExhaustive) {
  for (int c = 0; c < 256; ++c) {
    const float e4 = e4m3ToFloat(uint8_t(c));
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(e4)) << c;
    } else {
      EXPECT_EQ(double(e4), fp8Value(uint8_t(c), 3, 7)) << c;
    }
    const float e5 = e5m2ToFloat(uint8_t(c));
    if ((c & 0x7C) == 0x7C) {
      if ((c & 3) == 0) {
        EXPECT_EQ(e5, (c & 0x80) ? -kInf : kInf) << c;
      } else {
        EXPECT_TRUE(std::isnan(e5)) << c;
      }
    } else {
      EXPECT_EQ(double(e5), fp8Value(uint8_t(c), 2, 15)) << c;
    }
  }
}

TEST(KernelConvert, RoundTripsEveryCode) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const uint16_t h = uint16_t(c);
    const bool halfNan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    EXPECT_EQ(floatToHalf(halfToFloat(h)), halfNan ? 0x7E00 : h) << c;
    const bool bfNan = (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0;
    EXPECT_EQ(floatToBf16(bf16ToFloat(h)), bfNan ? 0x7FC0 : h) << c;
    if (!bfNan) {
      EXPECT_EQ(std::bit_cast<uint32_t>(bf16ToFloat(h)), c << 16) << c;
    }
  }
  for (uint32_t c = 0; c < 256; ++c) {
    const uint8_t v = uint8_t(c);
    EXPECT_EQ(floatToE4m3(e4m3ToFloat(v)), (v & 0x7F) == 0x7F ? 0x7F : v) << c;
    const bool e5Special = (v & 0x7C) == 0x7C;
    const uint8_t e5Expect = !e5Special ? v : (v & 3) ? 0x7F : uint8_t((v & 0x80) | 0x7B);
    EXPECT_EQ(floatToE5m2(e5m2ToFloat(v)), e5Expect) << c;
  }
}

[[gnu::target("f16c")]] float f16cDecode(uint16_t h) { return _cvtsh_ss(h); }
[[gnu::target("f16c")]] uint16_t f16cEncode(float f) {
  return std::isnan(f) ? 0x7E00 : uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST(KernelConvert, HalfMatchesF16c) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "CPU without F16C";
  for (uint32_t c = 0; c < 65536; ++c) {
    EXPECT_EQ(std::bit_cast<uint32_t>(halfToFloat(uint16_t(c))),
              std::bit_cast<uint32_t>(f16cDecode(uint16_t(c))))
        << c;
  }
  // Every midpoint between neighbouring halves, and one float either side.
  for (uint32_t c = 0; c < 0x7C00; ++c) {
    const float lo = halfToFloat(uint16_t(c));
    const float hi = c + 1 == 0x7C00 ? 65536.0f : halfToFloat(uint16_t(c + 1));
    const float mid = lo + (hi - lo) / 2;
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)}) {
      ASSERT_EQ(floatToHalf(x), f16cEncode(x)) << x;
      ASSERT_EQ(floatToHalf(-x), f16cEncode(-x)) << -x;
    }
  }
  // A sweep over all float bit patterns.
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 65521) {
    const float x = std::bit_cast<float>(uint32_t(bits));
    ASSERT_EQ(floatToHalf(x), f16cEncode(x)) << std::hex << bits;
  }
}

// Nearest finite fp8 code to x by exhaustive search, ties to the even code.
uint8_t nearestFp8(float x, int mant, int bias, uint8_t maxCode) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(double(x));
  uint8_t best = 0;
  double bestErr = INFINITY;
  for (int c = 0; c <= maxCode; ++c) {
    const double err = std::fabs(fp8Value(uint8_t(c), mant, bias) - a);
    if (err < bestErr || (err == bestErr && (c & 1) == 0)) {
      best = uint8_t(c);
      bestErr = err;
    }
  }
  return best | sign;
}

TEST(KernelConvert, Fp8EncodeMatchesNearestSearch) {
  // Every float from 2^-12 up to 2^17 at a prime stride, both signs.
  const uint32_t lo = std::bit_cast<uint32_t>(std::ldexp(1.0f, -12));
  const uint32_t hi = std::bit_cast<uint32_t>(std::ldexp(1.0f, 17));
  for (uint32_t bits = lo; bits < hi; bits += 4099) {
    const float x = std::bit_cast<float>(bits);
    for (float v : {x, -x}) {
      ASSERT_EQ(floatToE4m3(v), nearestFp8(v, 3, 7, 0x7E)) << v;
      ASSERT_EQ(floatToE5m2(v), nearestFp8(v, 2, 15, 0x7B)) << v;
    }
  }
  // Every midpoint between neighbouring codes, and one float either side.
  for (int c = 0; c < 0x7E; ++c) {
    const float mid = float((fp8Value(uint8_t(c), 3, 7) + fp8Value(uint8_t(c + 1), 3, 7)) / 2);
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)})
      ASSERT_EQ(floatToE4m3(v), nearestFp8(v, 3, 7, 0x7E)) << v;
  }
  for (int c = 0; c < 0x7B; ++c) {
    const float mid = float((fp8Value(uint8_t(c), 2, 15) + fp8Value(uint8_t(c + 1), 2, 15)) / 2);
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)})
      ASSERT_EQ(floatToE5m2(v), nearestFp8(v, 2, 15, 0x7B)) << v;
  }
}

TEST(KernelConvert, Bf16MidpointsRoundToEven) {
  for (uint32_t c = 0; c < 0x7F80; ++c) {
    const uint32_t mid = (c << 16) + 0x8000;  // halfway to c + 1
    const uint16_t even = (c & 1) ? uint16_t(c + 1) : uint16_t(c);
    ASSERT_EQ(floatToBf16(std::bit_cast<float>(mid)), even) << c;
    ASSERT_EQ(floatToBf16(std::bit_cast<float>(mid - 1)), c) << c;
    ASSERT_EQ(floatToBf16(std::bit_cast<float>(mid + 1)), c + 1) << c;
    ASSERT_EQ(floatToBf16(std::bit_cast<float>(mid | 0x80000000u)), even | 0x8000) << c;
  }
}

}  // namespace
}  // namespace ferry::kernels
