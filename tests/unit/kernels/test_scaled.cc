// reduceScaled, scale, divide and scalarFromBytes against exact values.
#include <type_traits>

#include "tests/unit/kernels/test_util.h"

namespace ferry::kernels {
namespace {

using testing::Bytes;
using testing::getAt;
using testing::setAt;

constexpr size_t kCounts[] = {0, 1, 7, 1000003};

template <class T>
Scalar scalarOf(DType t, T v) {
  return scalarFromBytes(t, &v);
}

// Inputs as in test_reduce_exact: ints over the whole range, floats small
// halves (e5m2: small integers). With s = -2 every result is exact.
template <class T>
T intIn(size_t i, int which) {
  return which == 0 ? T(uint64_t(i) * 0x9E3779B97F4A7C15ull + 77)
                    : T((uint64_t(i) * 40503u) ^ 0xC6A4A7935BD1E995ull);
}
double floatIn(size_t i, int which, DType t) {
  if (t == DType::kFp8E5M2) return which == 0 ? int(i * 3 % 7) - 3 : int(i * 3 % 5) - 2;
  return which == 0 ? (int(i * 7 % 13) - 6) / 2.0 : (int(i * 5 % 9) - 4) / 2.0;
}

struct Case {
  Bytes a, b, scaled, scaledOnly, divided;  // expected results
};

// Expected a + b*s, b*s and a/n for s = -2 (ints: -2 wrapped), n = 3 for
// integers and 4 for floats (exact).
Case makeCase(DType t, size_t n) {
  const size_t sz = sizeOf(t);
  Case c{Bytes(n * sz), Bytes(n * sz), Bytes(n * sz), Bytes(n * sz), Bytes(n * sz)};
  auto ints = [&](auto tag) {
    using T = decltype(tag);
    using U = std::make_unsigned_t<T>;
    const U s = U(-2);
    for (size_t i = 0; i < n; ++i) {
      const T x = intIn<T>(i, 0), y = intIn<T>(i, 1);
      setAt<T>(c.a, i, x);
      setAt<T>(c.b, i, y);
      setAt<T>(c.scaled, i, T(U(U(x) + U(U(y) * s))));
      setAt<T>(c.scaledOnly, i, T(U(U(y) * s)));
      setAt<T>(c.divided, i, std::is_signed_v<T> ? T(int64_t(x) / 3) : T(uint64_t(x) / 3));
    }
  };
  switch (t) {
    case DType::kInt8: ints(int8_t{}); break;
    case DType::kUint8: ints(uint8_t{}); break;
    case DType::kInt32: ints(int32_t{}); break;
    case DType::kUint32: ints(uint32_t{}); break;
    case DType::kInt64: ints(int64_t{}); break;
    case DType::kUint64: ints(uint64_t{}); break;
    default:
      for (size_t i = 0; i < n; ++i) {
        const double x = floatIn(i, 0, t), y = floatIn(i, 1, t);
        testing::setValue(c.a, i, t, x);
        testing::setValue(c.b, i, t, y);
        testing::setValue(c.scaled, i, t, x + y * -2);
        testing::setValue(c.scaledOnly, i, t, y * -2);
        testing::setValue(c.divided, i, t, x / 4);
      }
  }
  return c;
}

Scalar minusTwo(DType t) {
  switch (t) {
    case DType::kInt8: return scalarOf<int8_t>(t, -2);
    case DType::kUint8: return scalarOf<uint8_t>(t, uint8_t(-2));
    case DType::kInt32: return scalarOf<int32_t>(t, -2);
    case DType::kUint32: return scalarOf<uint32_t>(t, uint32_t(-2));
    case DType::kInt64: return scalarOf<int64_t>(t, -2);
    case DType::kUint64: return scalarOf<uint64_t>(t, uint64_t(-2));
    case DType::kFloat16: return scalarOf<uint16_t>(t, 0xC000);
    case DType::kFloat32: return scalarOf<float>(t, -2.0f);
    case DType::kFloat64: return scalarOf<double>(t, -2.0);
    case DType::kBfloat16: return scalarOf<uint16_t>(t, 0xC000);
    case DType::kFp8E4M3: return scalarOf<uint8_t>(t, 0xC0);
    default: return scalarOf<uint8_t>(t, 0xC0);  // e5m2 -2
  }
}

void expectSame(const Bytes& got, const Bytes& want, size_t n, DType t, const char* what) {
  const long long bad = testing::firstMismatch(got, want, n, t);
  EXPECT_EQ(bad, -1) << what << ": " << name(t) << " count " << n << " element " << bad
                     << " got " << (bad >= 0 ? testing::hexAt(got, size_t(bad), t) : "")
                     << " want " << (bad >= 0 ? testing::hexAt(want, size_t(bad), t) : "");
}

class KernelScaled : public ::testing::TestWithParam<DType> {};

TEST_P(KernelScaled, ReduceScaledScaleDivide) {
  const DType t = GetParam();
  const Scalar s = minusTwo(t);
  const uint64_t den = testing::isIntType(t) ? 3 : 4;
  for (size_t n : kCounts) {
    SCOPED_TRACE("count " + std::to_string(n));
    const Case c = makeCase(t, n);
    Bytes d(c.a.size()), d2(c.a.size());
    reduceScaled(d.data(), d2.data(), c.a.data(), c.b.data(), n, t, s);
    expectSame(d, c.scaled, n, t, "reduceScaled dst");
    expectSame(d2, c.scaled, n, t, "reduceScaled dst2");
    Bytes x = c.a;
    reduceScaled(x.data(), nullptr, x.data(), c.b.data(), n, t, s);
    expectSame(x, c.scaled, n, t, "reduceScaled dst==a");
    Bytes y = c.b;
    reduceScaled(y.data(), nullptr, c.a.data(), y.data(), n, t, s);
    expectSame(y, c.scaled, n, t, "reduceScaled dst==b");

    scale(d.data(), c.b.data(), n, t, s);
    expectSame(d, c.scaledOnly, n, t, "scale");
    Bytes z = c.b;
    scale(z.data(), z.data(), n, t, s);
    expectSame(z, c.scaledOnly, n, t, "scale in place");

    divide(d.data(), c.a.data(), n, t, den);
    expectSame(d, c.divided, n, t, "divide");
    Bytes w = c.a;
    divide(w.data(), w.data(), n, t, den);
    expectSame(w, c.divided, n, t, "divide in place");
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, KernelScaled, ::testing::ValuesIn(testing::kAllTypes),
                         [](const auto& info) { return std::string(name(info.param)); });

template <class T, size_t N>
void checkDivide(DType t, const T (&in)[N], uint64_t n, const T (&want)[N]) {
  T out[N];
  divide(out, in, N, t, n);
  for (size_t i = 0; i < N; ++i)
    EXPECT_EQ(out[i], want[i]) << name(t) << " " << int64_t(in[i]) << " / " << n;
}

TEST(KernelDivide, NegativeIntegersTruncateTowardZero) {
  checkDivide<int8_t>(DType::kInt8, {-128, -127, -7, -1, 0, 1, 7, 127, -3}, 3,
                      {-42, -42, -2, 0, 0, 0, 2, 42, -1});
  checkDivide<int8_t>(DType::kInt8, {-128, 127, -1}, 1000, {0, 0, 0});
  checkDivide<uint8_t>(DType::kUint8, {255, 254, 3, 2}, 3, {85, 84, 1, 0});
  checkDivide<int32_t>(DType::kInt32, {INT32_MIN, INT32_MAX, -5, 5, -2147483647}, 2,
                       {-1073741824, 1073741823, -2, 2, -1073741823});
  checkDivide<uint32_t>(DType::kUint32, {UINT32_MAX, 10}, 7, {613566756u, 1u});
  checkDivide<uint32_t>(DType::kUint32, {UINT32_MAX}, uint64_t(1) << 40, {0u});
  checkDivide<int64_t>(DType::kInt64, {INT64_MIN, INT64_MAX, -7, 7}, 3,
                       {-3074457345618258602ll, 3074457345618258602ll, -2, 2});
  checkDivide<int64_t>(DType::kInt64, {INT64_MIN, INT64_MAX, -1}, uint64_t(1) << 63,
                       {-1, 0, 0});
  checkDivide<uint64_t>(DType::kUint64, {UINT64_MAX, 9}, 10, {1844674407370955161ull, 0});
}

TEST(KernelDivide, FloatsRoundOnce) {
  const float in[5] = {1.0f, -10.0f, 7.0f, 1e-40f, 3.4e38f};
  float out[5];
  divide(out, in, 5, DType::kFloat32, 3);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], in[i] / 3.0f) << i;
  uint16_t h[3] = {floatToHalf(1.0f), floatToHalf(-10.0f), 0x7BFF};
  uint16_t ho[3];
  divide(ho, h, 3, DType::kFloat16, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ho[i], floatToHalf(halfToFloat(h[i]) / 3.0f)) << i;
  EXPECT_EQ(ho[0], 0x3555);  // 1/3 in float16
  const uint8_t e[2] = {0x7E, 0x01};  // 448, 2^-9
  uint8_t eo[2];
  divide(eo, e, 2, DType::kFp8E4M3, 4);
  EXPECT_EQ(eo[0], 0x6E);  // 112
  EXPECT_EQ(eo[1], 0x00);  // 2^-11 rounds to 0
}

TEST(KernelDivide, ZeroDivisorCopies) {
  const int32_t in[3] = {5, -6, 7};
  int32_t out[3] = {0, 0, 0};
  divide(out, in, 3, DType::kInt32, 0);
  EXPECT_EQ(out[1], -6);
}

TEST(KernelScalarFromBytes, EveryType) {
  const Scalar i8 = scalarOf<int8_t>(DType::kInt8, -5);
  EXPECT_EQ(i8.i, -5);
  EXPECT_EQ(i8.u, uint64_t(-5));
  EXPECT_EQ(i8.f, -5.0);
  const Scalar u64 = scalarOf<uint64_t>(DType::kUint64, UINT64_MAX);
  EXPECT_EQ(u64.u, UINT64_MAX);
  EXPECT_EQ(u64.f, 18446744073709551616.0);
  EXPECT_EQ(scalarOf<uint32_t>(DType::kUint32, 4000000000u).i, 4000000000ll);
  EXPECT_EQ(scalarOf<uint16_t>(DType::kFloat16, 0x3555).f, 0.333251953125);
  EXPECT_EQ(scalarOf<uint16_t>(DType::kBfloat16, 0xC2F7).f, -123.5);
  EXPECT_EQ(scalarOf<uint8_t>(DType::kFp8E4M3, 0x7E).f, 448.0);
  EXPECT_EQ(scalarOf<uint8_t>(DType::kFp8E5M2, 0x7B).f, 57344.0);
  EXPECT_EQ(scalarOf<float>(DType::kFloat32, 0.1f).f, double(0.1f));
  EXPECT_EQ(scalarOf<double>(DType::kFloat64, 0.1).f, 0.1);
  EXPECT_EQ(scalarOf<int32_t>(DType::kInt32, 7).type, DType::kInt32);
}

TEST(KernelScaledInt, IntegerScalarWrapsInType) {
  // int8: 100 * 3 wraps to 44; uint8 scalar 255 acts as -1.
  const int8_t a[2] = {1, -128}, b[2] = {100, 1};
  int8_t d[2];
  reduceScaled(d, nullptr, a, b, 2, DType::kInt8, scalarOf<int8_t>(DType::kInt8, 3));
  EXPECT_EQ(d[0], int8_t(45));
  EXPECT_EQ(d[1], int8_t(-125));
  const uint8_t ua[1] = {10}, ub[1] = {3};
  uint8_t ud[1];
  reduceScaled(ud, nullptr, ua, ub, 1, DType::kUint8, scalarOf<uint8_t>(DType::kUint8, 255));
  EXPECT_EQ(ud[0], 7);
}

}  // namespace
}  // namespace ferry::kernels
