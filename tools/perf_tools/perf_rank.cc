#include "tools/perf_tools/perf_rank.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "tools/demo/bench_sweep.h"
#include "tools/perf_tools/perf_data.h"

namespace ferry::perf {

bool Rank::allocBuffers(bench::RegisteredBuffers& reg) {
  const size_t bytes = o.maxBytes + static_cast<size_t>(o.unalign) * 8;
  if (reg.mode() == bench::kRegisterNone) {
    send_ = mem_.alloc(bytes);
    recv_ = mem_.alloc(bytes);
  } else {
    // The same 64 bytes of slack as PerfMem::alloc. On host memory PerfMem's
    // host(), upload() and download() need no block of their own; on a
    // device ncclMemAlloc's memory is the device's, mirrored like PerfMem's.
    const bool dev = mem_.device();
    send_ = static_cast<unsigned char*>(reg.alloc(bytes + 64, !dev));
    recv_ = static_cast<unsigned char*>(reg.alloc(bytes + 64, !dev));
    if (dev && send_ && recv_ && !(mem_.adopt(send_, bytes + 64) && mem_.adopt(recv_, bytes + 64)))
      return false;
  }
  return send_ != nullptr && recv_ != nullptr;
}

// Device ops need device memory even for a few bytes, so host values go
// through a scratch buffer (a grown one replaces the old; PerfMem frees all).
unsigned char* Rank::scratch(size_t bytes) {
  if (bytes > scratchBytes_) {
    scratch_ = mem_.alloc(std::max<size_t>(bytes, 4096));
    scratchBytes_ = scratch_ != nullptr ? std::max<size_t>(bytes, 4096) : 0;
  }
  return scratch_;
}

bool Rank::allReduce(double* v, size_t count, ncclRedOp_t op) {
  const size_t bytes = count * sizeof(double);
  unsigned char* s = scratch(bytes);
  if (s == nullptr) return false;
  std::memcpy(mem_.host(s), v, bytes);
  if (!mem_.upload(s, bytes) ||
      !ncclOk(ncclAllReduce(s, s, count, ncclFloat64, op, comm_, mem_.stream()), comm_, rank(),
              "ncclAllReduce (combine)") ||
      !mem_.download(s, bytes)) {
    return false;
  }
  std::memcpy(v, mem_.host(s), bytes);
  return true;
}

bool Rank::allGather(const void* mine, void* all, size_t bytes) {
  const size_t total = bytes * static_cast<size_t>(n());
  unsigned char* s = scratch(total);
  if (s == nullptr) return false;
  unsigned char* slot = s + bytes * static_cast<size_t>(rank());
  std::memcpy(mem_.host(slot), mine, bytes);
  if (!mem_.upload(slot, bytes) ||
      !ncclOk(ncclAllGather(slot, s, bytes, ncclChar, comm_, mem_.stream()), comm_, rank(),
              "ncclAllGather") ||
      !mem_.download(s, total)) {
    return false;
  }
  std::memcpy(all, mem_.host(s), total);
  return true;
}

bool Rank::barrier() {
  double token = 0;
  return allReduce(&token, 1, ncclSum);
}

// Rank 0 gets the time combined per -a, the summed wrong count and the
// number of ranks that saw a wrong value. Over the comm itself, so every
// launch mode combines the same way; it runs after the timed loop.
bool Rank::combine(double secs, int64_t wrong, double* time, int64_t* sumWrong, int* badRanks) {
  double sums[3] = {secs, wrong > 0 ? static_cast<double>(wrong) : 0.0, wrong > 0 ? 1.0 : 0.0};
  double maxes[2] = {secs, -secs};  // max of -secs is -min
  if (!allReduce(sums, 3, ncclSum) || !allReduce(maxes, 2, ncclMax)) return false;
  *sumWrong = static_cast<int64_t>(sums[1]);
  *badRanks = static_cast<int>(sums[2]);
  const double byMode[] = {secs, sums[0] / n(), -maxes[1], maxes[0]};
  *time = byMode[o.average];
  return true;
}

// Every rank's per-iteration times reach every rank; rank 0 reports them.
bool Rank::gatherIters(const std::vector<double>& mine, IterReport* out) {
  std::vector<double> all(mine.size() * static_cast<size_t>(n()));
  if (!allGather(mine.data(), all.data(), mine.size() * sizeof(double))) return false;
  std::vector<std::vector<double>> perRank;
  for (int r = 0; r < n(); ++r) {
    perRank.emplace_back(all.begin() + static_cast<long>(r * mine.size()),
                         all.begin() + static_cast<long>((r + 1) * mine.size()));
  }
  *out = makeIterReport(std::move(perRank), o.perIterSkip);
  return true;
}

bool Rank::iteration(const void* s, void* r, size_t count, int type, int op, int root) {
  if (o.aggIters > 1 && !ncclOk(ncclGroupStart(), comm_, rank(), "ncclGroupStart")) return false;
  for (int a = 0; a < o.aggIters; ++a) {
    if (!ncclOk(runColl(c, s, r, count, type, op, root, comm_, rank(), n(), mem_.stream()), comm_,
                rank(), c.testName)) {
      return false;
    }
  }
  if (o.aggIters > 1 && !ncclOk(ncclGroupEnd(), comm_, rank(), "ncclGroupEnd")) return false;
  return o.blocking != 1 || (mem_.sync() && barrier());
}

bool Rank::warmup(int type, int op, int root) {
  const size_t elt = typeSize(type);
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= 2) {
    size_t count = countFor(c, bytes, elt, n());
    for (int i = 0; i < o.warmup; ++i) {
      if (!iteration(send_ + o.unalign * elt, recv_ + o.unalign * elt, count, type, op, root)) {
        return false;
      }
    }
    if (bytes == 0) break;  // doubling zero never reaches max
  }
  return mem_.sync();
}

// -c repetitions with fresh inputs, stopping at the first failing one as
// nccl-tests; *wrong is -1 when this rank's result is not checked.
bool Rank::check(size_t sizeIndex, unsigned char* s, unsigned char* r, size_t count, int type,
                 int op, int root, bool inPlace, int64_t* wrong) {
  const size_t elt = typeSize(type);
  Layout l = layoutFor(c, count, n(), rank(), elt);
  const int dataOp = c.reduces ? op : kOpNone;
  const bool checked = o.check > 0 && checksRecv(c, rank(), root, inPlace);
  *wrong = checked ? 0 : -1;
  for (int k = 0; k < o.check; ++k) {
    uint64_t seed = 1 + sizeIndex * 1000 + static_cast<uint64_t>(k);
    fillInputs(mem_.host(s), l.sendElems, seed, type, dataOp, n(), rank());
    if (!mem_.upload(s, l.sendElems * elt) ||
        !ncclOk(runColl(c, s, r, count, type, op, root, comm_, rank(), n(), mem_.stream()), comm_,
                rank(), c.testName) ||
        !mem_.sync()) {
      return false;
    }
    if (!checked) continue;
    if (!mem_.download(r, l.recvElems * elt)) return false;
    unsigned char* got = mem_.host(r);
    if (o.corruptForTest && l.recvElems > 0) got[elt - 1] ^= 0x40;  // a high bit of element 0
    *wrong += countWrong(c, got, count, type, op, seed, n(), rank(), root);
    if (*wrong > 0) break;
  }
  return true;
}

bool Rank::measure(size_t sizeIndex, size_t count, int type, int op, int root, bool inPlace,
                   bench::Half* half, IterReport* iter) {
  const size_t elt = typeSize(type);
  Layout l = layoutFor(c, count, n(), rank(), elt);
  unsigned char* sb = send_ + o.unalign * elt;
  unsigned char* rb = recv_ + o.unalign * elt;
  unsigned char* s = inPlace ? rb + l.inPlaceSendOff * elt : sb;
  unsigned char* r = inPlace ? rb + l.inPlaceRecvOff * elt : rb;
  fillInputs(mem_.host(s), l.sendElems, 0, type, c.reduces ? op : kOpNone, n(), rank());
  if (!mem_.upload(s, l.sendElems * elt) || !barrier()) return false;
  // As nccl-tests, each timed iteration moves both buffers on by one op's
  // footprint (wrapping within maxBytes) so small sizes are not timed
  // from a warm cache. Inputs there are stale, which timing does not mind.
  size_t span = std::max({l.sendElems, l.recvElems, l.inPlaceSendOff + l.sendElems,
                          l.inPlaceRecvOff + l.recvElems}) *
                elt;
  using Clock = std::chrono::steady_clock;
  std::vector<double> itersUs;
  const double opsPerIter = o.aggIters;
  auto t0 = Clock::now();
  for (int i = 0; i < o.iters; ++i) {
    size_t shift = bench::iterationShift(span, o.maxBytes, i);
    // Only -I reads the clock per iteration: at 8 B a read is ~10% of an op.
    Clock::time_point ti = o.perIter ? Clock::now() : Clock::time_point{};
    if (!iteration(s + shift, r + shift, count, type, op, root)) return false;
    // -I times each iteration on its own: wait for it before the clock.
    if (o.perIter) {
      if (!mem_.sync()) return false;
      itersUs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - ti).count() /
                        opsPerIter);
    }
  }
  if (!mem_.sync()) return false;
  double secs = std::chrono::duration<double>(Clock::now() - t0).count() /
                (static_cast<double>(o.iters) * o.aggIters);
  int64_t wrong = -1;
  if (!check(sizeIndex, s, r, count, type, op, root, inPlace, &wrong)) return false;
  double time = 0;
  int64_t sumWrong = 0;
  int badRanks = 0;
  if (!combine(secs, wrong, &time, &sumWrong, &badRanks)) return false;
  if (o.perIter && !gatherIters(itersUs, iter)) return false;
  const bool anyCheck =
      o.check > 0 && !(inPlace && (c.coll == Coll::kSendRecv || c.coll == Coll::kAlltoAllv));
  *half = bench::makeHalf(0, time, busFactor(c, n()), anyCheck ? sumWrong : -1, badRanks);
  double alg = algBytes(c, count, elt, n());
  half->algbw = time > 0 ? alg / time / 1e9 : 0;
  half->busbw = half->algbw * busFactor(c, n());
  if (o.perIter) half->extra = formatIterColumns(iter->stats);
  return true;
}

}  // namespace ferry::perf
