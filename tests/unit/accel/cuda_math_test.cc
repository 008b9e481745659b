// The CUDA kernels' arithmetic (src/accel/cuda/reduce_math.h) instantiated on
// the host, bit for bit against kernels::reduce for every datatype and op,
// and against kernels::divide (Avg's final values):
// the 8-bit types over every pair of codes, the 16-bit types every code
// against a spread of others (zeros, subnormals, the largest finite values,
// infinities, NaNs, random codes), the wider types over random values and
// their specials. (float32/float64 Sum and Prod with a NaN result may carry
// any quiet NaN, kernels/reduce.h: the hardware picks the payload, and a GPU
// gives its canonical one; there both must merely be NaN.)
#include "accel/cuda/reduce_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/reduce.h"

namespace ferry::cudamath {
namespace {

using kernels::DType;
using kernels::Op;

bool bothNan(const uint8_t* x, const uint8_t* y, DType t) {
  if (t == DType::kFloat32) {
    float a, b;
    std::memcpy(&a, x, 4);
    std::memcpy(&b, y, 4);
    return std::isnan(a) && std::isnan(b);
  }
  if (t == DType::kFloat64) {
    double a, b;
    std::memcpy(&a, x, 8);
    std::memcpy(&b, y, 8);
    return std::isnan(a) && std::isnan(b);
  }
  return false;
}

template <class A>
void reduceWithMath(void* dst, const void* a, const void* b, size_t n, Op op) {
  reduceRange<A>(dst, a, b, 0, n, 1, static_cast<int>(op));
}

// want (host kernels) against got (reduce_math.h), element by element;
// float32/float64 NaNs may differ in payload where `nanFree` allows.
void compare(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got, const std::vector<uint8_t>& a,
             DType t, bool nanFree, const std::string& what) {
  const size_t e = kernels::sizeOf(t), n = want.size() / e;
  if (std::memcmp(want.data(), got.data(), want.size()) == 0) return;
  size_t bad = 0;
  for (size_t i = 0; i < n && bad < 5; ++i) {
    if (std::memcmp(&want[i * e], &got[i * e], e) == 0) continue;
    if (nanFree && bothNan(&want[i * e], &got[i * e], t)) continue;
    uint64_t x = 0, w = 0, g = 0;
    std::memcpy(&x, &a[i * e], e);
    std::memcpy(&w, &want[i * e], e);
    std::memcpy(&g, &got[i * e], e);
    ADD_FAILURE() << kernels::name(t) << " " << what << std::hex << ": element " << std::dec << i << std::hex
                  << " from 0x" << x << " is 0x" << w << " on the host kernels, 0x" << g << " in reduce_math.h";
    ++bad;
  }
}

// a and b of n elements of type t; compares both implementations: every
// op, and Avg's division (every divisor class: none, small, huge).
template <class A>
void expectSame(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, DType t) {
  const size_t n = a.size() / kernels::sizeOf(t);
  std::vector<uint8_t> want(a.size()), got(a.size());
  for (Op op : {Op::kSum, Op::kProd, Op::kMax, Op::kMin}) {
    kernels::reduce(want.data(), a.data(), b.data(), n, t, op);
    reduceWithMath<A>(got.data(), a.data(), b.data(), n, op);
    compare(want, got, a, t, op == Op::kSum || op == Op::kProd, kernels::name(op));
  }
  for (uint64_t d : {uint64_t(0), uint64_t(1), uint64_t(2), uint64_t(3), uint64_t(7), uint64_t(1) << 63,
                     ~uint64_t(0)}) {
    kernels::divide(want.data(), a.data(), n, t, d);
    divideRange<A>(got.data(), a.data(), 0, n, 1, d);
    compare(want, got, a, t, true, "divide by " + std::to_string(d));
  }
}

template <class A, class S>
void allPairs(DType t) {
  std::vector<uint8_t> a, b;
  for (uint32_t x = 0; x < 256; ++x)
    for (uint32_t y = 0; y < 256; ++y) {
      a.push_back(uint8_t(x));
      b.push_back(uint8_t(y));
    }
  expectSame<A>(a, b, t);
}

template <class A>
void everyCodeAgainstSome(DType t, std::vector<uint16_t> others) {
  std::mt19937 rng(7);
  for (int i = 0; i < 64; ++i) others.push_back(uint16_t(rng()));
  std::vector<uint8_t> a, b;
  for (uint16_t y : others)
    for (uint32_t x = 0; x < 65536; ++x) {
      uint16_t xx = uint16_t(x);
      a.insert(a.end(), reinterpret_cast<uint8_t*>(&xx), reinterpret_cast<uint8_t*>(&xx) + 2);
      b.insert(b.end(), reinterpret_cast<uint8_t*>(&y), reinterpret_cast<uint8_t*>(&y) + 2);
    }
  expectSame<A>(a, b, t);
}

template <class A, class T>
void randomValues(DType t, std::vector<T> specials) {
  std::mt19937_64 rng(11);
  std::vector<T> x, y;
  for (int i = 0; i < 200000; ++i) {
    uint64_t r = rng(), s = rng();
    T u, v;
    std::memcpy(&u, &r, sizeof(T));
    std::memcpy(&v, &s, sizeof(T));
    x.push_back(u);
    y.push_back(v);
  }
  for (T s : specials)
    for (T o : specials) {
      x.push_back(s);
      y.push_back(o);
    }
  std::vector<uint8_t> a(x.size() * sizeof(T)), b(a.size());
  std::memcpy(a.data(), x.data(), a.size());
  std::memcpy(b.data(), y.data(), b.size());
  expectSame<A>(a, b, t);
}

TEST(CudaMath, Fp8AndByteIntegersEveryPair) {
  allPairs<E4m3, uint8_t>(DType::kFp8E4M3);
  allPairs<E5m2, uint8_t>(DType::kFp8E5M2);
  allPairs<Int8, int8_t>(DType::kInt8);
  allPairs<Uint8, uint8_t>(DType::kUint8);
}

TEST(CudaMath, HalfAndBfloat16EveryCode) {
  everyCodeAgainstSome<Half>(DType::kFloat16, {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF,
                                               0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01, 0x5BFF, 0x1234});
  everyCodeAgainstSome<Bf16>(DType::kBfloat16, {0x0000, 0x8000, 0x0001, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x7F7F,
                                                0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFC1, 0x4B7F, 0x1234});
}

TEST(CudaMath, WideTypesRandomAndSpecials) {
  const float fi = std::numeric_limits<float>::infinity(), fn = std::numeric_limits<float>::quiet_NaN();
  const double di = std::numeric_limits<double>::infinity(), dn = std::numeric_limits<double>::quiet_NaN();
  randomValues<Float32, float>(DType::kFloat32, {0.0f, -0.0f, 1.0f, -1.0f, 1e-45f, 3.4e38f, fi, -fi, fn});
  randomValues<Float64, double>(DType::kFloat64, {0.0, -0.0, 1.0, -1.0, 5e-324, 1.7e308, di, -di, dn});
  randomValues<Int32, int32_t>(DType::kInt32, {0, -1, 1, INT32_MAX, INT32_MIN});
  randomValues<Uint32, uint32_t>(DType::kUint32, {0, 1, UINT32_MAX});
  randomValues<Int64, int64_t>(DType::kInt64, {0, -1, 1, INT64_MAX, INT64_MIN});
  randomValues<Uint64, uint64_t>(DType::kUint64, {0, 1, UINT64_MAX});
}

}  // namespace
}  // namespace ferry::cudamath
