#include "kernels/stream_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ferry::kernels {
namespace {

#if defined(__x86_64__)
// A whole line per store where AVX-512 exists; SSE2 (every x86-64) otherwise.
// Both fill write-combining buffers a line at a time.
__attribute__((target("avx512f"))) void streamLines512(char* d, const char* s, size_t n) {
  for (size_t i = 0; i < n; i += 64) {
    __m512i v = _mm512_loadu_si512(reinterpret_cast<const void*>(s + i));
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), v);
  }
}

void streamLines128(char* d, const char* s, size_t n) {
  for (size_t i = 0; i < n; i += 64) {
    for (size_t j = 0; j < 64; j += 16) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + j));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + j), v);
    }
  }
}

bool haveAvx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#endif

}  // namespace

void copyOut(bool pastCache, void* dst, const void* src, size_t n) {
  if (pastCache) {
    copyPastCache(dst, src, n);
  } else {
    std::memcpy(dst, src, n);
  }
}

void copyPastCache(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  // Ordinary stores up to dst's next line boundary and for the partial last line.
  size_t head = (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64;
  if (head >= n) {
    std::memcpy(d, s, n);
    return;
  }
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  size_t lines = n / 64 * 64;
  if (haveAvx512()) {
    streamLines512(d, s, lines);
  } else {
    streamLines128(d, s, lines);
  }
  std::memcpy(d + lines, s + lines, n - lines);
  _mm_sfence();
#else
  std::memcpy(dst, src, n);
#endif
}

int TwoWayChoice::next(bool* trial) {
  int other = 1 - mode_;
  *trial = trialLeft_ > 0;
  if (*trial) return other;  // the trial goes on
  if (cost_[other] >= 0 && ++sinceTry_ < interval_) return mode_;
  sinceTry_ = 0;
  trialLeft_ = kTrialCalls;
  *trial = true;
  return other;
}

void TwoWayChoice::record(int way, double cost, bool trial) {
  double& c = cost_[way];
  if (!trial) {
    bool first = c < 0;
    c = first ? cost : 0.75 * c + 0.25 * cost;
    // The way in use measured for the first time, after the opening trial
    // of the other: take the cheaper one now, not a whole interval later
    // (a 12-call 2-rank 64 MiB AllReduce in a slow phase stayed on
    // ordinary stores throughout: 1.95 GB/s against 5.83 streamed).
    if (first && way == mode_ && cost_[1 - way] >= 0 && cost_[1 - way] < c) {
      mode_ = 1 - way;
      interval_ = kMinInterval;
    }
    return;
  }
  // Only a trial's last call counts: the first pay for the state the other
  // way left behind (lines the reader holds, for instance).
  if (--trialLeft_ > 0) return;
  c = cost;
  if (cost_[mode_] < 0) return;
  if (c < cost_[mode_]) {
    mode_ = way;
    interval_ = kMinInterval;
  } else {
    interval_ = std::min(kMaxInterval, interval_ * 2);
  }
}

}  // namespace ferry::kernels
