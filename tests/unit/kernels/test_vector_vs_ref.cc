// Every vector table this CPU supports (generic, AVX2, AVX-512) against the
// scalar reference, bit for bit, on random inputs rich in NaN, inf,
// subnormals and overflow.
#include <bit>
#include <cstdio>

#include "kernels/dispatch.h"
#include "kernels/reference.h"
#include "tests/unit/kernels/test_util.h"

namespace ferry::kernels {
namespace {

using detail::Isa;
using detail::KernelTable;
using testing::Bytes;

// Counts that cover empty, sub-register, multi-register and ragged tails for
// every lane width (up to 64 lanes).
constexpr size_t kCounts[] = {0, 1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 200, 4099};

// Special float32 values mixed into float inputs.
constexpr uint32_t kSpecialF32[] = {
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
    0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0x477FE000,
    0x477FF000, 0x43E00000, 0x43E80000, 0x47600000, 0x33800000, 0x3B000000, 0x3A800000};

// Random bit patterns; for float32/64 one element in four is a special value
// (low-precision types already hit every code with random bits).
Bytes randomBuffer(std::mt19937_64& rng, DType t, size_t n) {
  Bytes b(n * sizeOf(t) + 64);
  for (auto& x : b) x = uint8_t(rng());
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 4 != 0) continue;
    const uint32_t sp = kSpecialF32[rng() % std::size(kSpecialF32)];
    if (t == DType::kFloat32) testing::setAt<uint32_t>(b, i, sp);
    if (t == DType::kFloat64) testing::setAt<double>(b, i, double(std::bit_cast<float>(sp)));
  }
  return b;
}

Scalar randomScalar(std::mt19937_64& rng, DType t) {
  uint8_t bytes[8];
  for (auto& x : bytes) x = uint8_t(rng());
  const bool lowp = t == DType::kFloat16 || t == DType::kBfloat16 || t == DType::kFp8E4M3 ||
                    t == DType::kFp8E5M2;
  if (!lowp || rng() % 2 == 0) {
    return scalarFromBytes(t, bytes);
  }
  // Low-precision kernels use the scalar as a float32: try arbitrary ones,
  // which sends arbitrary float32 products through the encoders.
  Scalar s{t};
  s.f = double(std::bit_cast<float>(uint32_t(rng())));
  return s;
}

std::vector<Isa> supportedIsas() {
  std::vector<Isa> out;
  for (int i = 0; i < int(Isa::kCount); ++i) {
    if (detail::tableFor(Isa(i)) != nullptr) out.push_back(Isa(i));
  }
  return out;
}

void expectSame(const Bytes& got, const Bytes& want, size_t n, DType t, const std::string& what) {
  const long long bad = testing::firstMismatch(got, want, n, t);
  ASSERT_EQ(bad, -1) << what << " " << name(t) << " count " << n << " element " << bad << " got "
                     << (bad >= 0 ? testing::hexAt(got, size_t(bad), t) : "") << " want "
                     << (bad >= 0 ? testing::hexAt(want, size_t(bad), t) : "");
}

class KernelVectorVsRef : public ::testing::TestWithParam<Isa> {};

TEST_P(KernelVectorVsRef, AllKernelsMatchReference) {
  const KernelTable* table = detail::tableFor(GetParam());
  if (table == nullptr) GTEST_SKIP() << "CPU lacks " << detail::isaName(GetParam());
  std::mt19937_64 rng(1234 + int(GetParam()));
  for (DType t : testing::kAllTypes) {
    for (int round = 0; round < 3; ++round) {
      for (size_t n : kCounts) {
        const Bytes a = randomBuffer(rng, t, n), b = randomBuffer(rng, t, n);
        Bytes want(a.size()), got(a.size()), got2(a.size());
        for (Op op : testing::kAllOps) {
          ref::reduce2(want.data(), nullptr, a.data(), b.data(), n, t, op);
          table->reduce[int(t)][int(op)](got.data(), got2.data(), a.data(), b.data(), n);
          expectSame(got, want, n, t, std::string("reduce ") + name(op));
          expectSame(got2, want, n, t, std::string("reduce dst2 ") + name(op));
        }
        const Scalar s = randomScalar(rng, t);
        ref::reduceScaled(want.data(), nullptr, a.data(), b.data(), n, t, s);
        table->reduceScaled[int(t)](got.data(), got2.data(), a.data(), b.data(), n, s);
        expectSame(got, want, n, t, "reduceScaled");
        expectSame(got2, want, n, t, "reduceScaled dst2");
        ref::scale(want.data(), b.data(), n, t, s);
        table->scale[int(t)](got.data(), b.data(), n, s);
        expectSame(got, want, n, t, "scale");
        const uint64_t den = 1 + rng() % (round == 2 ? 100000 : 9);
        ref::divide(want.data(), a.data(), n, t, den);
        table->divide[int(t)](got.data(), a.data(), n, den);
        expectSame(got, want, n, t, "divide by " + std::to_string(den));
      }
    }
  }
}

// The same through the public API (the active table), with aliasing.
TEST_P(KernelVectorVsRef, AliasedOperandsMatchReference) {
  const KernelTable* table = detail::tableFor(GetParam());
  if (table == nullptr) GTEST_SKIP() << "CPU lacks " << detail::isaName(GetParam());
  std::mt19937_64 rng(99);
  for (DType t : testing::kAllTypes) {
    const size_t n = 1000;
    const Bytes a = randomBuffer(rng, t, n), b = randomBuffer(rng, t, n);
    Bytes want(a.size());
    for (Op op : testing::kAllOps) {
      ref::reduce2(want.data(), nullptr, a.data(), b.data(), n, t, op);
      Bytes x = a;
      table->reduce[int(t)][int(op)](x.data(), nullptr, x.data(), b.data(), n);
      expectSame(x, want, n, t, "dst==a");
      Bytes y = b;
      table->reduce[int(t)][int(op)](y.data(), nullptr, a.data(), y.data(), n);
      expectSame(y, want, n, t, "dst==b");
    }
  }
}

// fp8: every (a, b) pair; float16/bfloat16: 2^18 random pairs. Each
// through every op, several scalars (exact, inexact, tiny, huge, NaN, inf)
// and divisors.
TEST_P(KernelVectorVsRef, LowPrecisionDenseSweep) {
  const KernelTable* table = detail::tableFor(GetParam());
  if (table == nullptr) GTEST_SKIP() << "CPU lacks " << detail::isaName(GetParam());
  std::mt19937_64 rng(5);
  const float kScalars[] = {1.0f, -0.5f, 3.7f, 1e-3f, 1e5f, 65519.0f,
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::infinity()};
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2, DType::kFloat16, DType::kBfloat16}) {
    const size_t n = sizeOf(t) == 1 ? 65536 : (size_t(1) << 18);
    Bytes a(n * sizeOf(t)), b(n * sizeOf(t));
    for (size_t i = 0; i < n; ++i) {
      if (sizeOf(t) == 1) {
        a[i] = uint8_t(i);
        b[i] = uint8_t(i >> 8);
      } else {
        testing::setAt<uint16_t>(a, i, uint16_t(rng()));
        testing::setAt<uint16_t>(b, i, uint16_t(rng()));
      }
    }
    Bytes want(a.size()), got(a.size());
    for (Op op : testing::kAllOps) {
      ref::reduce2(want.data(), nullptr, a.data(), b.data(), n, t, op);
      table->reduce[int(t)][int(op)](got.data(), nullptr, a.data(), b.data(), n);
      expectSame(got, want, n, t, std::string("dense ") + name(op));
    }
    for (float f : kScalars) {
      Scalar s{t};
      s.f = f;
      ref::reduceScaled(want.data(), nullptr, a.data(), b.data(), n, t, s);
      table->reduceScaled[int(t)](got.data(), nullptr, a.data(), b.data(), n, s);
      expectSame(got, want, n, t, "dense reduceScaled by " + std::to_string(f));
      ref::scale(want.data(), a.data(), n, t, s);
      table->scale[int(t)](got.data(), a.data(), n, s);
      expectSame(got, want, n, t, "dense scale by " + std::to_string(f));
    }
    for (uint64_t den : {1, 3, 7, 1000}) {
      ref::divide(want.data(), a.data(), n, t, den);
      table->divide[int(t)](got.data(), a.data(), n, den);
      expectSame(got, want, n, t, "dense divide by " + std::to_string(den));
    }
  }
}

// 8-bit division runs in float32: every value against every interesting n.
TEST_P(KernelVectorVsRef, EightBitDivideExhaustive) {
  const KernelTable* table = detail::tableFor(GetParam());
  if (table == nullptr) GTEST_SKIP() << "CPU lacks " << detail::isaName(GetParam());
  Bytes src(256), want(256), got(256);
  for (int i = 0; i < 256; ++i) src[i] = uint8_t(i);
  const uint64_t dens[] = {1, 2, 3, 5, 7, 127, 128, 129, 255, 256, 1000, (1u << 24) + 1,
                           uint64_t(1) << 40, ~uint64_t(0)};
  for (DType t : {DType::kInt8, DType::kUint8}) {
    for (uint64_t den : dens) {
      ref::divide(want.data(), src.data(), 256, t, den);
      table->divide[int(t)](got.data(), src.data(), 256, den);
      expectSame(got, want, 256, t, "divide by " + std::to_string(den));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, KernelVectorVsRef,
                         ::testing::Values(Isa::kGeneric, Isa::kAvx2, Isa::kAvx512),
                         [](const auto& info) { return std::string(detail::isaName(info.param)); });

TEST(KernelDispatch, ActiveIsaIsTheBestSupported) {
  const auto isas = supportedIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(detail::activeIsa(), isas.back());
  EXPECT_EQ(&detail::activeTable(), detail::tableFor(isas.back()));
  std::printf("kernels: active ISA %s\n", detail::isaName(detail::activeIsa()));
}

TEST(KernelDispatch, PublicApiMatchesReference) {
  std::mt19937_64 rng(7);
  for (DType t : testing::kAllTypes) {
    const size_t n = 777;
    const Bytes a = randomBuffer(rng, t, n), b = randomBuffer(rng, t, n);
    Bytes want(a.size()), got(a.size());
    for (Op op : testing::kAllOps) {
      ref::reduce2(want.data(), nullptr, a.data(), b.data(), n, t, op);
      reduce(got.data(), a.data(), b.data(), n, t, op);
      expectSame(got, want, n, t, "public reduce");
    }
  }
}

}  // namespace
}  // namespace ferry::kernels
