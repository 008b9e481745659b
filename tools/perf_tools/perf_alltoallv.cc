#include "tools/perf_tools/perf_alltoallv.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tools/perf_tools/perf_data.h"

namespace ferry::perf {
namespace {

using AlltoallvFn = ncclResult_t (*)(const void*, const size_t*, const size_t*, void*,
                                     const size_t*, const size_t*, ncclDataType_t, ncclComm_t,
                                     cudaStream_t);

AlltoallvFn ferryFn() {
  static AlltoallvFn fn = reinterpret_cast<AlltoallvFn>(dlsym(RTLD_DEFAULT, "ferryAlltoAllv"));
  return fn;
}

}  // namespace

bool haveFerryAlltoallv() { return ferryFn() != nullptr; }

bool alltoallvFullGroup() {
  const char* v = std::getenv("FERRY_PERF_ALLTOALLV_P2P");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

ncclResult_t runAlltoallv(const void* send, void* recv, size_t param, int type, ncclComm_t comm,
                          int rank, int n, bool useExtension, cudaStream_t stream) {
  const size_t elt = typeSize(type);
  const auto dt = static_cast<ncclDataType_t>(type);
  AlltoallvPlan plan = alltoallvPlan(alltoallvPattern(), param, elt, n, rank);
  const bool full = alltoallvFullGroup();
  if (useExtension && ferryFn() != nullptr && !full) {
    return ferryFn()(send, plan.sendCounts.data(), plan.sendDispls.data(), recv,
                     plan.recvCounts.data(), plan.recvDispls.data(), dt, comm, stream);
  }
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  const auto* sb = static_cast<const unsigned char*>(send);
  auto* rb = static_cast<unsigned char*>(recv);
  for (int peer = 0; peer < n && r == ncclSuccess; ++peer) {
    if (plan.sendCounts[peer] > 0 || full)
      r = ncclSend(sb + plan.sendDispls[peer] * elt, plan.sendCounts[peer], dt, peer, comm, stream);
    if (r == ncclSuccess && (plan.recvCounts[peer] > 0 || full))
      r = ncclRecv(rb + plan.recvDispls[peer] * elt, plan.recvCounts[peer], dt, peer, comm, stream);
  }
  ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

int64_t alltoallvWrong(const AlltoallvPattern& p, const void* recv, size_t param, int type,
                       uint64_t seed, int n, int rank) {
  const size_t elt = typeSize(type);
  const size_t total = param * static_cast<size_t>(n) * elt;
  const auto* got = static_cast<const unsigned char*>(recv);
  unsigned char exp[8];
  int64_t wrong = 0;
  size_t at = 0;
  for (int src = 0; src < n; ++src) {
    // Where this rank's segment starts in src's send buffer.
    size_t srcOff = 0;
    for (int k = 0; k < rank; ++k) srcOff += p.peerBytes(src, k, n, total) / elt;
    const size_t cnt = p.peerBytes(src, rank, n, total) / elt;
    for (size_t i = 0; i < cnt; ++i, ++at) {
      encode(inputValue(seed, type, kOpNone, n, src, srcOff + i), type, exp);
      if (!matches(type, kOpNone, n, got + at * elt, exp, seed, at)) ++wrong;
    }
  }
  return wrong;
}

std::string alltoallvSummary(const AlltoallvPattern& p, size_t param, size_t elt, int n,
                             double seconds) {
  const size_t total = param * static_cast<size_t>(n) * elt;
  char buf[256];
  std::string out;
  if (p.matrixMode()) {
    std::snprintf(buf, sizeof buf,
                  "# NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: mode=matrix nranks=%d matrix_dim=%d "
                  "scale=%.3f time_usec=%.2f\n",
                  n, p.dim, p.scale, seconds * 1e6);
  } else {
    std::snprintf(buf, sizeof buf,
                  "# NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: mode=generated nranks=%d total_bytes=%zu "
                  "spread=%.3f time_usec=%.2f\n",
                  n, total, p.spread, seconds * 1e6);
  }
  out += buf;
  for (int r = 0; r < n; ++r) {
    size_t s = 0, v = 0;
    for (int peer = 0; peer < n; ++peer) {
      s += p.peerBytes(r, peer, n, total);
      v += p.peerBytes(peer, r, n, total);
    }
    double alg = seconds > 0 ? static_cast<double>(std::max(s, v)) / 1e9 / seconds : 0.0;
    std::snprintf(buf, sizeof buf, "#   rank=%d send_bytes=%zu recv_bytes=%zu alg_bw=%.2f bus_bw=%.2f\n",
                  r, s, v, alg, alg * (n - 1) / n);
    out += buf;
  }
  return out;
}

}  // namespace ferry::perf
