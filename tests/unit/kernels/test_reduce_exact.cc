// reduce/reduce2 through the public API: every dtype x op x count against
// exact expected values, including dst aliasing a or b.
#include <type_traits>

#include "tests/unit/kernels/test_util.h"

namespace ferry::kernels {
namespace {

using testing::Bytes;
using testing::getAt;
using testing::setAt;

constexpr size_t kCounts[] = {0, 1, 7, 1000003};

// Integer inputs spread over the whole range of the type.
template <class T>
void fillInts(Bytes& a, Bytes& b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    setAt<T>(a, i, T(uint64_t(i) * 0x9E3779B97F4A7C15ull + 12345));
    setAt<T>(b, i, T((uint64_t(i) * 40503u) ^ 0x5BD1E9955BD1E995ull));
  }
  if (n > 0) setAt<T>(b, 0, T(-1));  // all ones: max of unsigned, -1 of signed
}

template <class T>
T expectInt(T x, T y, Op op) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case Op::kSum: return T(U(uint64_t(x) + uint64_t(y)));
    case Op::kProd: return T(U(uint64_t(x) * uint64_t(y)));
    case Op::kMax: return x > y ? x : y;
    case Op::kMin: return x < y ? x : y;
  }
  return 0;
}

// Float inputs whose sums and products are exact in every floating type:
// halves in [-3, 3] and quarters in [-1, 1] (e5m2, with 2 mantissa bits:
// integers in [-3, 3] and [-2, 2]). Sign of zero products is exercised too.
double floatA(size_t i, DType t) {
  const double k = double(int((i * 7) % 13) - 6);
  return t == DType::kFp8E5M2 ? double(int((i * 3) % 7) - 3) : k / 2;
}
double floatB(size_t i, DType t) {
  const double k = double(int((i * 5) % 9) - 4);
  return t == DType::kFp8E5M2 ? double(int((i * 3) % 5) - 2) : k / 4;
}

double expectFloat(double x, double y, Op op) {
  switch (op) {
    case Op::kSum: return x + y;
    case Op::kProd: return x * y;
    case Op::kMax: return x > y ? x : y;
    case Op::kMin: return x < y ? x : y;
  }
  return 0;
}

struct Inputs {
  Bytes a, b, expect;
};

Inputs makeInputs(DType t, Op op, size_t n) {
  const size_t sz = sizeOf(t);
  Inputs in{Bytes(n * sz + 1), Bytes(n * sz + 1), Bytes(n * sz + 1)};
  auto ints = [&](auto tag) {
    using T = decltype(tag);
    fillInts<T>(in.a, in.b, n);
    for (size_t i = 0; i < n; ++i)
      setAt<T>(in.expect, i, expectInt<T>(getAt<T>(in.a, i), getAt<T>(in.b, i), op));
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
        testing::setValue(in.a, i, t, floatA(i, t));
        testing::setValue(in.b, i, t, floatB(i, t));
        testing::setValue(in.expect, i, t, expectFloat(floatA(i, t), floatB(i, t), op));
      }
  }
  return in;
}

void expectSame(const Bytes& got, const Bytes& want, size_t n, DType t, const char* what) {
  const long long bad = testing::firstMismatch(got, want, n, t);
  EXPECT_EQ(bad, -1) << what << ": " << name(t) << " count " << n << " element " << bad
                     << " got " << (bad >= 0 ? testing::hexAt(got, size_t(bad), t) : "")
                     << " want " << (bad >= 0 ? testing::hexAt(want, size_t(bad), t) : "");
}

class KernelReduceExact : public ::testing::TestWithParam<DType> {};

TEST_P(KernelReduceExact, AllOpsAndCounts) {
  const DType t = GetParam();
  const size_t sz = sizeOf(t);
  for (Op op : testing::kAllOps) {
    for (size_t n : kCounts) {
      SCOPED_TRACE(std::string(name(op)) + " count " + std::to_string(n));
      const Inputs in = makeInputs(t, op, n);
      const uint8_t kGuard = 0xA5;
      Bytes d(n * sz + 1, kGuard), d2(n * sz + 1, kGuard);

      reduce(d.data(), in.a.data(), in.b.data(), n, t, op);
      expectSame(d, in.expect, n, t, "reduce");
      EXPECT_EQ(d[n * sz], kGuard) << "wrote past the end";

      Bytes x = in.a;  // dst == a
      reduce(x.data(), x.data(), in.b.data(), n, t, op);
      expectSame(x, in.expect, n, t, "dst==a");

      Bytes y = in.b;  // dst == b
      reduce(y.data(), in.a.data(), y.data(), n, t, op);
      expectSame(y, in.expect, n, t, "dst==b");

      std::fill(d.begin(), d.end(), kGuard);
      reduce2(d.data(), d2.data(), in.a.data(), in.b.data(), n, t, op);
      expectSame(d, in.expect, n, t, "reduce2 dst");
      expectSame(d2, in.expect, n, t, "reduce2 dst2");
      EXPECT_EQ(d2[n * sz], kGuard) << "dst2 written past the end";

      Bytes z = in.a;  // reduce2 with dst == a and a null dst2
      reduce2(z.data(), nullptr, z.data(), in.b.data(), n, t, op);
      expectSame(z, in.expect, n, t, "reduce2 null dst2");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, KernelReduceExact, ::testing::ValuesIn(testing::kAllTypes),
                         [](const auto& info) { return std::string(name(info.param)); });

TEST(KernelReduceSpecial, LowPrecisionOverflowAndNan) {
  // float16: 60000 + 60000 overflows to inf; e4m3 and e5m2 saturate.
  Bytes a(2 * 2), b(2 * 2), d(2 * 2);
  testing::setValue(a, 0, DType::kFloat16, 60000);
  testing::setValue(b, 0, DType::kFloat16, 60000);
  setAt<uint16_t>(a, 1, 0x7C01);  // a signalling NaN with a payload
  testing::setValue(b, 1, DType::kFloat16, 1);
  reduce(d.data(), a.data(), b.data(), 2, DType::kFloat16, Op::kSum);
  EXPECT_EQ(getAt<uint16_t>(d, 0), 0x7C00);
  EXPECT_EQ(getAt<uint16_t>(d, 1), 0x7E00);

  Bytes p(2), q(2), r(2);
  p[0] = 0x7E; q[0] = 0x7E;  // 448 + 448 -> 448 (saturated)
  p[1] = 0xFE; q[1] = 0x7F;  // -448 max NaN -> canonical NaN
  reduce(r.data(), p.data(), q.data(), 2, DType::kFp8E4M3, Op::kSum);
  EXPECT_EQ(r[0], 0x7E);
  reduce(r.data(), p.data(), q.data(), 2, DType::kFp8E4M3, Op::kMax);
  EXPECT_EQ(r[1], 0x7F);
  p[0] = 0x7C; q[0] = 0x3C;  // e5m2 inf * 1 -> max finite
  reduce(r.data(), p.data(), q.data(), 1, DType::kFp8E5M2, Op::kProd);
  EXPECT_EQ(r[0], 0x7B);
}

TEST(KernelReduceSpecial, FloatMaxMinNanPropagates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float av[4] = {nan, 1.0f, -0.0f, 2.0f};
  const float bv[4] = {1.0f, nan, 0.0f, -3.0f};
  float mx[4], mn[4];
  reduce(mx, av, bv, 4, DType::kFloat32, Op::kMax);
  reduce(mn, av, bv, 4, DType::kFloat32, Op::kMin);
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]));
  EXPECT_FALSE(std::signbit(mx[2]));  // equal: b (+0)
  EXPECT_FALSE(std::signbit(mn[2]));
  EXPECT_EQ(mx[3], 2.0f);
  EXPECT_EQ(mn[3], -3.0f);
}

TEST(KernelReduceSpecial, TypeInfo) {
  EXPECT_EQ(sizeOf(DType::kInt64), 8u);
  EXPECT_EQ(sizeOf(DType::kBfloat16), 2u);
  EXPECT_EQ(sizeOf(DType::kFp8E5M2), 1u);
  EXPECT_EQ(sizeOf(DType::kCount), 0u);
  EXPECT_STREQ(name(DType::kFloat16), "float16");
  EXPECT_STREQ(name(DType::kBfloat16), "bfloat16");
  EXPECT_STREQ(name(DType::kFp8E4M3), "fp8e4m3");
  EXPECT_STREQ(name(DType::kFp8E5M2), "fp8e5m2");
  EXPECT_STREQ(name(Op::kProd), "prod");
  EXPECT_STREQ(name(static_cast<Op>(9)), "invalid");
}

}  // namespace
}  // namespace ferry::kernels
