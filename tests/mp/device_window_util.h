// Shared by the device-window suites (device_window_test.cc,
// device_window_stream_test.cc): an arena of device memory registered as a
// window, with a host mirror, and one AllReduce on it.
#pragma once

#include <ferry/device.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {

inline const std::string& logDir() { return testLogDir("devwin"); }

constexpr size_t kArenaBytes = 8 << 20;
constexpr size_t kGuardElems = 16;

// A device window (input half, output half) and its host mirror.
struct Arena {
  void* base = nullptr;
  ncclWindow_t win = nullptr;
  void* stream = nullptr;
  std::vector<char> host = std::vector<char>(kArenaBytes);
  char* in() { return host.data(); }
  char* out() { return host.data() + kArenaBytes / 2; }
  // The device address of a mirror address.
  char* dev(const char* h) { return static_cast<char*>(base) + (h - host.data()); }
};

inline int openArena(const Rank& me, Arena* a) {
  MP_NCCL(ncclMemAlloc(&a->base, kArenaBytes));
  MP_NCCL(ncclCommWindowRegister(me.comm, a->base, kArenaBytes, &a->win, NCCL_WIN_COLL_SYMMETRIC));
  MP_NCCL(ferryDeviceStreamCreate(&a->stream));
  return 0;
}

inline int closeArena(const Rank& me, Arena* a) {
  MP_NCCL(ferryDeviceStreamSynchronize(a->stream));
  MP_NCCL(ncclCommWindowDeregister(me.comm, a->win));
  MP_NCCL(ferryDeviceStreamDestroy(a->stream));
  MP_NCCL(ncclMemFree(a->base));
  return 0;
}

// A rank that ends its communicator itself (abort or destroy, which
// withComm's teardown would not do), its arena made: f(me, a) runs, then the
// arena's stream and memory go (the window with the communicator).
inline int ownComm(int rank, int nranks, const ncclUniqueId& id, const std::function<int(Rank&, Arena&)>& f) {
  ncclComm_t comm;
  MP_NCCL(initComm(&comm, nranks, id, rank));
  Rank me{comm, rank, nranks};
  Arena a;
  MP_TRY(openArena(me, &a));
  MP_TRY(f(me, a));
  MP_NCCL(ferryDeviceStreamDestroy(a.stream));
  MP_NCCL(ncclMemFree(a.base));
  return 0;
}

// Mirror -> device, the call, device -> mirror, all on the arena's stream.
inline int onDevice(Arena* a, const std::function<ncclResult_t()>& call) {
  MP_NCCL(ferryDeviceMemcpyAsync(a->base, a->host.data(), kArenaBytes, a->stream));
  MP_NCCL(call());
  MP_NCCL(ferryDeviceMemcpyAsync(a->host.data(), a->base, kArenaBytes, a->stream));
  MP_NCCL(ferryDeviceStreamSynchronize(a->stream));
  return 0;
}

inline int stagedBytes(const Rank& me, unsigned long long* staged) {
  MP_NCCL(ferryCommStagedBytes(me.comm, staged));
  return 0;
}

// Ranks on `backend`'s memory: testdev, or CUDA through the stand-in
// driver (a real one where tools/gpu-check.sh names it).
inline RunOptions opts(const std::string& tag, Env env = {}, int timeoutSec = 240,
                const std::string& backend = "testdev") {
  env["FERRY_DEVICE"] = backend;
  const char* real = std::getenv("FERRY_TEST_CUDA_LIBRARY");
  if (backend == "cuda") env["FERRY_CUDA_LIBRARY"] = real ? real : FERRY_FAKECUDA;
  return loggedOptions(logDir(), tag, "INIT,COLL", std::move(env), timeoutSec);
}

// Host buffers a stream copies from and into: they must outlive the copies.
struct Io {
  std::vector<int32_t> in, out;
};

// One AllReduce of n ints on window offset `off` (input) and the output
// half at the same offset, on stream s; inputs r * 10 + i.
inline int windowAllReduce(const Rank& me, Arena& a, size_t off, size_t n, void* s, Io* io, bool grouped = false) {
  io->in.resize(n);
  for (size_t i = 0; i < n; ++i) io->in[i] = me.rank * 10 + int32_t(i);
  char* base = static_cast<char*>(a.base) + off;
  std::vector<int32_t>* out = &io->out;
  out->assign(n, -1);
  MP_NCCL(ferryDeviceMemcpyAsync(base, io->in.data(), n * 4, s));
  if (grouped) MP_NCCL(ncclGroupStart());
  MP_NCCL(ncclAllReduce(base, base + kArenaBytes / 2, n, ncclInt32, ncclSum, me.comm, static_cast<cudaStream_t>(s)));
  if (grouped) MP_NCCL(ncclGroupEnd());
  MP_NCCL(ferryDeviceMemcpyAsync(out->data(), base + kArenaBytes / 2, n * 4, s));
  return 0;
}

inline int checkAllReduce(const Rank& me, const Io& io, const char* what) {
  const std::vector<int32_t>& out = io.out;
  const int32_t ranks = 10 * me.nranks * (me.nranks - 1) / 2;
  for (size_t i = 0; i < out.size(); ++i)
    MP_CHECK(out[i] == ranks + me.nranks * int32_t(i), "rank %d: %s element %zu is %d", me.rank, what, i, out[i]);
  return 0;
}

}  // namespace ferry::mp
