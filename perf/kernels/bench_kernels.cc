// bench_kernels: throughput of the reduction kernels.
//
// bytes_per_second counts bytes read + written: 3 x buffer for reduce
// (a, b -> dst), 2 x buffer for memcpy, the baseline. Sizes are per buffer.
//   reduce/<dtype>/<op>/<size>      the public API (best ISA for this CPU)
//   reduce_isa/<isa>/<dtype>/sum/<size>  one ISA table, to compare them
//   reduceScaled/<dtype>/1MiB, divide/<dtype>/1MiB  PreMulSum and Avg steps
//   memcpy/<size>
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/reduce.h"

namespace {

using ferry::kernels::DType;
using ferry::kernels::Op;
namespace detail = ferry::kernels::detail;

constexpr size_t kSizes[] = {size_t(64) << 10, size_t(1) << 20, size_t(64) << 20};

std::string sizeName(size_t bytes) {
  return bytes >= (size_t(1) << 20) ? std::to_string(bytes >> 20) + "MiB"
                                    : std::to_string(bytes >> 10) + "KiB";
}

// Buffers filled with small values (1..7 as the type) so float sums and
// products stay finite and no path runs on denormals.
struct Buffers {
  std::vector<uint8_t> a, b, d;
  Buffers(DType t, size_t bytes) : a(bytes), b(bytes), d(bytes) {
    const size_t n = bytes / ferry::kernels::sizeOf(t);
    std::vector<uint8_t> one(8);
    for (size_t i = 0; i < n; ++i) {
      const size_t sz = ferry::kernels::sizeOf(t);
      valueBytes(t, 1 + int(i % 7), one.data());
      std::memcpy(a.data() + i * sz, one.data(), sz);
      valueBytes(t, 1 + int(i % 5), one.data());
      std::memcpy(b.data() + i * sz, one.data(), sz);
    }
    std::memset(d.data(), 0, d.size());
  }
  static void valueBytes(DType t, int v, uint8_t* out) {
    namespace k = ferry::kernels;
    uint64_t bits = 0;
    switch (t) {
      case DType::kFloat16: bits = k::floatToHalf(float(v)); break;
      case DType::kFloat32: { const float f = float(v); std::memcpy(&bits, &f, 4); break; }
      case DType::kFloat64: { const double f = v; std::memcpy(&bits, &f, 8); break; }
      case DType::kBfloat16: bits = k::floatToBf16(float(v)); break;
      case DType::kFp8E4M3: bits = k::floatToE4m3(float(v)); break;
      case DType::kFp8E5M2: bits = k::floatToE5m2(float(v)); break;
      default: bits = uint64_t(v); break;
    }
    std::memcpy(out, &bits, 8);
  }
};

void benchReduce(benchmark::State& state, DType t, Op op, size_t bytes) {
  Buffers buf(t, bytes);
  const size_t n = bytes / ferry::kernels::sizeOf(t);
  for (auto _ : state) {
    ferry::kernels::reduce(buf.d.data(), buf.a.data(), buf.b.data(), n, t, op);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(3 * bytes));
}

void benchIsa(benchmark::State& state, detail::Isa isa, DType t, size_t bytes) {
  const detail::KernelTable* table = detail::tableFor(isa);
  if (table == nullptr) {
    state.SkipWithError("ISA not supported by this CPU");
    return;
  }
  Buffers buf(t, bytes);
  const size_t n = bytes / ferry::kernels::sizeOf(t);
  for (auto _ : state) {
    table->reduce[int(t)][int(Op::kSum)](buf.d.data(), nullptr, buf.a.data(), buf.b.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(3 * bytes));
}

void benchScaled(benchmark::State& state, DType t, size_t bytes) {
  Buffers buf(t, bytes);
  const size_t n = bytes / ferry::kernels::sizeOf(t);
  uint8_t two[8];
  Buffers::valueBytes(t, 2, two);
  const ferry::kernels::Scalar s = ferry::kernels::scalarFromBytes(t, two);
  for (auto _ : state) {
    ferry::kernels::reduceScaled(buf.d.data(), nullptr, buf.a.data(), buf.b.data(), n, t, s);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(3 * bytes));
}

void benchDivide(benchmark::State& state, DType t, size_t bytes) {
  Buffers buf(t, bytes);
  const size_t n = bytes / ferry::kernels::sizeOf(t);
  for (auto _ : state) {
    ferry::kernels::divide(buf.d.data(), buf.a.data(), n, t, 3);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * bytes));
}

void benchMemcpy(benchmark::State& state, size_t bytes) {
  std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * bytes));
}

void registerAll() {
  for (size_t bytes : kSizes) {
    benchmark::RegisterBenchmark(("memcpy/" + sizeName(bytes)).c_str(), benchMemcpy, bytes);
  }
  for (int ti = 0; ti < ferry::kernels::kNumDTypes; ++ti) {
    for (int oi = 0; oi < ferry::kernels::kNumOps; ++oi) {
      for (size_t bytes : kSizes) {
        const DType t = DType(ti);
        const Op op = Op(oi);
        const std::string name = std::string("reduce/") + ferry::kernels::name(t) + "/" +
                                 ferry::kernels::name(op) + "/" + sizeName(bytes);
        benchmark::RegisterBenchmark(name.c_str(), benchReduce, t, op, bytes);
      }
    }
  }
  for (int ti = 0; ti < ferry::kernels::kNumDTypes; ++ti) {
    const DType t = DType(ti);
    const size_t bytes = size_t(1) << 20;
    const std::string suffix = std::string(ferry::kernels::name(t)) + "/" + sizeName(bytes);
    benchmark::RegisterBenchmark(("reduceScaled/" + suffix).c_str(), benchScaled, t, bytes);
    benchmark::RegisterBenchmark(("divide/" + suffix).c_str(), benchDivide, t, bytes);
  }
  for (int ii = 0; ii < int(detail::Isa::kCount); ++ii) {
    for (DType t : {DType::kInt8, DType::kFloat32, DType::kFloat16, DType::kBfloat16,
                    DType::kFp8E4M3, DType::kFp8E5M2}) {
      const size_t bytes = size_t(64) << 10;
      const detail::Isa isa = detail::Isa(ii);
      const std::string name = std::string("reduce_isa/") + detail::isaName(isa) + "/" +
                               ferry::kernels::name(t) + "/sum/" + sizeName(bytes);
      benchmark::RegisterBenchmark(name.c_str(), benchIsa, isa, t, bytes);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
