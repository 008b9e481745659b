// Public kernel entry points: type info, scalar decoding, and run-time
// dispatch to the best vector table the CPU supports.
#include "kernels/reduce.h"

#include <cstring>
#include <initializer_list>

#include "kernels/dispatch.h"

namespace ferry::kernels {
namespace {

bool validType(DType t) { return static_cast<unsigned>(t) < unsigned(kNumDTypes); }
bool validOp(Op op) { return static_cast<unsigned>(op) < unsigned(kNumOps); }

bool cpuHas(detail::Isa isa) {
#if defined(__x86_64__) && defined(FERRY_KERNELS_X86_ISAS)
  __builtin_cpu_init();
  switch (isa) {
    case detail::Isa::kGeneric: return true;
    case detail::Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case detail::Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    default: return false;
  }
#else
  return isa == detail::Isa::kGeneric;
#endif
}

template <class T>
T readAs(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

namespace detail {

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    default: return "invalid";
  }
}

const KernelTable* tableFor(Isa isa) {
  if (!cpuHas(isa)) return nullptr;
  switch (isa) {
    case Isa::kGeneric: return &genericTable();
#if defined(FERRY_KERNELS_X86_ISAS)
    case Isa::kAvx2: return &avx2Table();
    case Isa::kAvx512: return &avx512Table();
#endif
    default: return nullptr;
  }
}

Isa activeIsa() {
  static const Isa best = [] {
    for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
      if (cpuHas(isa)) return isa;
    }
    return Isa::kGeneric;
  }();
  return best;
}

const KernelTable& activeTable() {
  static const KernelTable* table = tableFor(activeIsa());
  return *table;
}

}  // namespace detail

const char* name(DType t) {
  static constexpr const char* kNames[kNumDTypes] = {
      "int8",    "uint8",   "int32",    "uint32",  "int64",   "uint64",
      "float16", "float32", "float64",  "bfloat16", "fp8e4m3", "fp8e5m2"};
  return validType(t) ? kNames[int(t)] : "invalid";
}

const char* name(Op op) {
  static constexpr const char* kNames[kNumOps] = {"sum", "prod", "max", "min"};
  return validOp(op) ? kNames[int(op)] : "invalid";
}

Scalar scalarFromBytes(DType t, const void* bytes) {
  Scalar s{t};
  auto setSigned = [&s](int64_t v) { s.i = v; s.u = uint64_t(v); s.f = double(v); };
  auto setUnsigned = [&s](uint64_t v) { s.u = v; s.i = int64_t(v); s.f = double(v); };
  switch (t) {
    case DType::kInt8: setSigned(readAs<int8_t>(bytes)); break;
    case DType::kUint8: setUnsigned(readAs<uint8_t>(bytes)); break;
    case DType::kInt32: setSigned(readAs<int32_t>(bytes)); break;
    case DType::kUint32: setUnsigned(readAs<uint32_t>(bytes)); break;
    case DType::kInt64: setSigned(readAs<int64_t>(bytes)); break;
    case DType::kUint64: setUnsigned(readAs<uint64_t>(bytes)); break;
    case DType::kFloat16: s.f = halfToFloat(readAs<uint16_t>(bytes)); break;
    case DType::kFloat32: s.f = readAs<float>(bytes); break;
    case DType::kFloat64: s.f = readAs<double>(bytes); break;
    case DType::kBfloat16: s.f = bf16ToFloat(readAs<uint16_t>(bytes)); break;
    case DType::kFp8E4M3: s.f = e4m3ToFloat(readAs<uint8_t>(bytes)); break;
    case DType::kFp8E5M2: s.f = e5m2ToFloat(readAs<uint8_t>(bytes)); break;
    default: break;
  }
  return s;
}

void reduce(void* dst, const void* a, const void* b, size_t count, DType t, Op op) {
  reduce2(dst, nullptr, a, b, count, t, op);
}

void reduce2(void* dst, void* dst2, const void* a, const void* b, size_t count, DType t,
             Op op) {
  if (count == 0 || !validType(t) || !validOp(op)) return;
  detail::activeTable().reduce[int(t)][int(op)](dst, dst2, a, b, count);
}

void reduceScaled(void* dst, void* dst2, const void* a, const void* b, size_t count, DType t,
                  const Scalar& s) {
  if (count == 0 || !validType(t)) return;
  detail::activeTable().reduceScaled[int(t)](dst, dst2, a, b, count, s);
}

void scale(void* dst, const void* src, size_t count, DType t, const Scalar& s) {
  if (count == 0 || !validType(t)) return;
  detail::activeTable().scale[int(t)](dst, src, count, s);
}

void divide(void* dst, const void* src, size_t count, DType t, uint64_t n) {
  if (count == 0 || !validType(t)) return;
  if (n == 0) {  // precondition violated; avoid dividing by zero
    if (dst != src) std::memmove(dst, src, count * sizeOf(t));
    return;
  }
  detail::activeTable().divide[int(t)](dst, src, count, n);
}

}  // namespace ferry::kernels
