// The cost model's vocabulary: what one step, one pipelined chain and one
// reduction cost on a CommView. Each algorithm's cost() composes these into
// its own formula (steps x latency + bytes on its slowest link / bandwidth,
// per level, with chunk pipelining), so the formulas read like the
// algorithms' textbook costs and the tuner (tuner.h) can compare them.
//
// Ranks that share cores (CommView::oversubscription f > 1): the CPU work of
// a rank (per-message overheads, copies, reductions) runs at 1/f of its
// speed, since f ranks' work shares each core. Latency (a message's flight
// and wake-up) does not scale: a rank that waits yields its core to the
// ranks that work. Measured here (8 netns hosts, 1 rank each, on 2 cores):
// 8-byte recursive doubling took 144 us and the one-hop direct 298 us, which
// 3L + 24o and L + 56o fit with o ~ 5 us, L ~ 7 us; scaling L by f as well
// predicted the opposite order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "algorithms/comm_view.h"

namespace ferry::cost {

inline double share(const CommView& v) { return std::max(1.0, v.oversubscription); }

// Latency of one dependent step across `l` (a wait for the peer).
inline double latency(const CommView& v, const LinkCost& l) { return l.latencyUs; }

// Time to move `bytes` across `l` once the step started.
inline double transfer(const CommView& v, const LinkCost& l, double bytes) {
  double bw = l.bytesPerUs;
  if (&l != &v.inter) bw /= share(v);  // copies by shared cores
  return bytes / bw;
}

// CPU time one message costs each of its ends (posting, matching, calls).
inline double overhead(const CommView& v, const LinkCost& l) { return l.overheadUs * share(v); }

// The start of a step in which a rank sends one message and receives one:
// the wait, and handling both messages.
inline double exchange(const CommView& v, const LinkCost& l) { return latency(v, l) + 2 * overhead(v, l); }

// A step that waits `waitUs` (latencies, per-message CPU work) and then
// keeps `l` busy for `wireUs`. On a wire the two add up. A token-bucket link
// (LinkCost::burstBytes) credits the time it idled, up to its bucket, and
// sends that much at full speed: waits hide wire time (measured over 4 netns
// hosts at 1 Gbit/s with a 128 KiB bucket: 8 KiB recursive doubling took its
// wire time alone, 137 us, not 137 us plus its two 21 us waits).
inline double overlap(const CommView& v, const LinkCost& l, double waitUs, double wireUs) {
  double credit = l.burstBytes > 0 ? std::min(waitUs, l.burstBytes / l.bytesPerUs) : 0.0;
  return waitUs + std::max(0.0, wireUs - credit);
}

// One step: wait for the peer, handle the message, move its bytes.
inline double hop(const CommView& v, const LinkCost& l, double bytes) {
  return overlap(v, l, latency(v, l) + overhead(v, l), transfer(v, l, bytes));
}

// Reducing `bytes` into a buffer.
inline double reduce(const CommView& v, double bytes) {
  return bytes / v.reduceBytesPerUs * share(v);
}

// Pieces a message of `bytes` is split into when steps carry at most
// chunkBytes (at least one).
inline double chunks(const CommView& v, double bytes) {
  if (v.chunkBytes == 0 || bytes <= static_cast<double>(v.chunkBytes)) return 1.0;
  return std::ceil(bytes / static_cast<double>(v.chunkBytes));
}

// A pipelined chain of `hops` hops over `l` carrying `bytes` in pieces: the
// first piece crosses every hop, the others follow one hop behind.
inline double chain(const CommView& v, const LinkCost& l, double bytes, int hops) {
  if (hops <= 0) return 0.0;
  double k = chunks(v, bytes);
  return (k + hops - 1) * hop(v, l, bytes / k);
}

// NICs that `crossing` ranks of one host leaving it at once spread over: a
// rail each, up to the rails; on a software link every rank moves its own.
inline double nics(const CommView& v, int crossing) {
  crossing = std::max(1, crossing);
  return v.inter.software ? crossing : std::max(1, std::min(crossing, v.nRails));
}

inline int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

}  // namespace ferry::cost
