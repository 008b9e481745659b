// Scalar reference kernels: the semantics of reduce.h written out plainly.
#include "kernels/reference.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace ferry::kernels::ref {
namespace {

template <class T>
struct IntArith {
  using S = T;  // storage
  using C = T;  // compute
  using U = std::make_unsigned_t<T>;
  static C dec(S x) { return x; }
  static S enc(C x) { return x; }
  static C add(C a, C b) { return C(U(a) + U(b)); }
  static C mul(C a, C b) { return C(U(a) * U(b)); }
  static C max(C a, C b) { return a > b ? a : b; }
  static C min(C a, C b) { return a < b ? a : b; }
  static C scalar(const Scalar& s) { return std::is_signed_v<T> ? C(s.i) : C(s.u); }
  static C div(C x, uint64_t n) {
    if constexpr (std::is_signed_v<T>) {
      const int64_t v = x;
      if (n > uint64_t(INT64_MAX)) return C(v == INT64_MIN && n == (uint64_t(1) << 63) ? -1 : 0);
      return C(v / int64_t(n));
    } else {
      return C(uint64_t(x) / n);
    }
  }
};

template <class F>
F fmaxRef(F a, F b) {
  if (std::isnan(a)) return a;
  return a > b ? a : b;
}
template <class F>
F fminRef(F a, F b) {
  if (std::isnan(a)) return a;
  return a < b ? a : b;
}

template <class T>
struct FloatArith {
  using S = T;
  using C = T;
  static C dec(S x) { return x; }
  static S enc(C x) { return x; }
  static C add(C a, C b) { return a + b; }
  static C mul(C a, C b) { return a * b; }
  static C max(C a, C b) { return fmaxRef(a, b); }
  static C min(C a, C b) { return fminRef(a, b); }
  static C scalar(const Scalar& s) { return C(s.f); }
  static C div(C x, uint64_t n) { return x / C(n); }
};

template <class St, float (*kDec)(St), St (*kEnc)(float)>
struct LowpArith {
  using S = St;
  using C = float;
  static C dec(S x) { return kDec(x); }
  static S enc(C x) { return kEnc(x); }
  static C add(C a, C b) { return a + b; }
  static C mul(C a, C b) { return a * b; }
  static C max(C a, C b) { return fmaxRef(a, b); }
  static C min(C a, C b) { return fminRef(a, b); }
  static C scalar(const Scalar& s) { return float(s.f); }
  static C div(C x, uint64_t n) { return x / float(n); }
};

// Calls f(Arith{}) for the arithmetic of type t; false if t is invalid.
template <class F>
bool withArith(DType t, F&& f) {
  switch (t) {
    case DType::kInt8: f(IntArith<int8_t>{}); return true;
    case DType::kUint8: f(IntArith<uint8_t>{}); return true;
    case DType::kInt32: f(IntArith<int32_t>{}); return true;
    case DType::kUint32: f(IntArith<uint32_t>{}); return true;
    case DType::kInt64: f(IntArith<int64_t>{}); return true;
    case DType::kUint64: f(IntArith<uint64_t>{}); return true;
    case DType::kFloat16: f(LowpArith<uint16_t, halfToFloat, floatToHalf>{}); return true;
    case DType::kFloat32: f(FloatArith<float>{}); return true;
    case DType::kFloat64: f(FloatArith<double>{}); return true;
    case DType::kBfloat16: f(LowpArith<uint16_t, bf16ToFloat, floatToBf16>{}); return true;
    case DType::kFp8E4M3: f(LowpArith<uint8_t, e4m3ToFloat, floatToE4m3>{}); return true;
    case DType::kFp8E5M2: f(LowpArith<uint8_t, e5m2ToFloat, floatToE5m2>{}); return true;
    default: return false;
  }
}

template <class S>
S get(const void* p, size_t i) {
  S v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(S), sizeof(S));
  return v;
}
template <class S>
void put(void* p, size_t i, S v) {
  if (p != nullptr) std::memcpy(static_cast<char*>(p) + i * sizeof(S), &v, sizeof(S));
}

}  // namespace

void reduce2(void* dst, void* dst2, const void* a, const void* b, size_t count, DType t, Op op) {
  withArith(t, [&](auto ar) {
    using A = decltype(ar);
    using S = typename A::S;
    for (size_t i = 0; i < count; ++i) {
      const auto x = A::dec(get<S>(a, i));
      const auto y = A::dec(get<S>(b, i));
      typename A::C r{};
      switch (op) {
        case Op::kSum: r = A::add(x, y); break;
        case Op::kProd: r = A::mul(x, y); break;
        case Op::kMax: r = A::max(x, y); break;
        case Op::kMin: r = A::min(x, y); break;
      }
      put<S>(dst, i, A::enc(r));
      put<S>(dst2, i, A::enc(r));
    }
  });
}

void reduceScaled(void* dst, void* dst2, const void* a, const void* b, size_t count, DType t,
                  const Scalar& s) {
  withArith(t, [&](auto ar) {
    using A = decltype(ar);
    using S = typename A::S;
    const auto sc = A::scalar(s);
    for (size_t i = 0; i < count; ++i) {
      // The product rounded to the storage type first, as scale() does.
      const auto r = A::add(A::dec(get<S>(a, i)), A::dec(A::enc(A::mul(A::dec(get<S>(b, i)), sc))));
      put<S>(dst, i, A::enc(r));
      put<S>(dst2, i, A::enc(r));
    }
  });
}

void scale(void* dst, const void* src, size_t count, DType t, const Scalar& s) {
  withArith(t, [&](auto ar) {
    using A = decltype(ar);
    using S = typename A::S;
    const auto sc = A::scalar(s);
    for (size_t i = 0; i < count; ++i) put<S>(dst, i, A::enc(A::mul(A::dec(get<S>(src, i)), sc)));
  });
}

void divide(void* dst, const void* src, size_t count, DType t, uint64_t n) {
  withArith(t, [&](auto ar) {
    using A = decltype(ar);
    using S = typename A::S;
    for (size_t i = 0; i < count; ++i) {
      const S x = get<S>(src, i);
      put<S>(dst, i, n == 0 ? x : A::enc(A::div(A::dec(x), n)));
    }
  });
}

}  // namespace ferry::kernels::ref
