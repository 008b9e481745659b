// bench_shm_copy: what one byte costs on each way the shm transport can move
// it between processes, 64 KiB .. 64 MiB per op (GB/s of payload):
//   Memcpy          one copy inside one address space (the lower bound);
//   ProcessVmReadv  one kernel-mediated copy (CMA), the single-copy path;
//                   it reads this process' own buffer, which costs the same
//                   page pinning and copy as a peer's;
//   SharedSlot      the two-copy path: sender copies into a MAP_SHARED slot
//                   (1 MiB, as a staging ring cell), receiver copies out;
//                   both copies on one thread, so the time is their sum.
//   SharedSlotPastCache  the same two copies, the first with non-temporal
//                   stores (kernels::copyPastCache), as the executor writes
//                   large pieces into a ring in some phases (slot_writes.h);
//   MappedPeer      the zero-copy path of ncclMemAlloc'd memory and
//                   symmetric windows: one memcpy out of a second mapping
//                   of a memfd segment, as a peer maps the owner's block
//                   (src/mem/shared_alloc.h); the owner writes through the
//                   first mapping, so the pages are shared, not copied.
// Each destination and source is touched before timing so page faults stay
// out of the loop.
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/stream_copy.h"

namespace {

constexpr size_t kSlotBytes = 1 << 20;

struct Buffers {
  explicit Buffers(size_t n)
      : bytes(n), src(static_cast<char*>(std::aligned_alloc(64, n))),
        dst(static_cast<char*>(std::aligned_alloc(64, n))) {
    std::memset(src, 1, n);
    std::memset(dst, 0, n);
  }
  ~Buffers() {
    std::free(src);
    std::free(dst);
  }
  size_t bytes;
  char* src;
  char* dst;
};

void setBytes(benchmark::State& state, size_t bytes) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(bytes));
}

void BM_Memcpy(benchmark::State& state) {
  Buffers b(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    std::memcpy(b.dst, b.src, b.bytes);
    benchmark::ClobberMemory();
  }
  setBytes(state, b.bytes);
}

void BM_ProcessVmReadv(benchmark::State& state) {
  Buffers b(static_cast<size_t>(state.range(0)));
  const pid_t self = getpid();
  for (auto _ : state) {
    iovec local{b.dst, b.bytes};
    iovec remote{b.src, b.bytes};
    ssize_t got = process_vm_readv(self, &local, 1, &remote, 1, 0);
    if (got != static_cast<ssize_t>(b.bytes)) {
      state.SkipWithError("process_vm_readv failed or was short (CMA not permitted?)");
      break;
    }
    benchmark::ClobberMemory();
  }
  setBytes(state, b.bytes);
}

// Two copies through a MAP_SHARED slot; `copyIn` writes the slot.
void sharedSlot(benchmark::State& state, void (*copyIn)(void*, const void*, size_t)) {
  Buffers b(static_cast<size_t>(state.range(0)));
  void* m = mmap(nullptr, kSlotBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    state.SkipWithError("mmap of the shared slot failed");
    return;
  }
  char* slot = static_cast<char*>(m);
  std::memset(slot, 0, kSlotBytes);
  for (auto _ : state) {
    for (size_t off = 0; off < b.bytes; off += kSlotBytes) {
      size_t n = std::min(kSlotBytes, b.bytes - off);
      copyIn(slot, b.src + off, n);
      benchmark::ClobberMemory();
      std::memcpy(b.dst + off, slot, n);
    }
    benchmark::ClobberMemory();
  }
  munmap(m, kSlotBytes);
  setBytes(state, b.bytes);
}

void plainCopy(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }

void BM_SharedSlot(benchmark::State& state) { sharedSlot(state, plainCopy); }

void BM_SharedSlotPastCache(benchmark::State& state) {
  sharedSlot(state, ferry::kernels::copyPastCache);
}

void BM_MappedPeer(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  int fd = static_cast<int>(syscall(SYS_memfd_create, "bench_mapped_peer", 0));
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    if (fd >= 0) close(fd);
    state.SkipWithError("memfd_create/ftruncate failed");
    return;
  }
  void* own = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  void* peer = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (own == MAP_FAILED || peer == MAP_FAILED) {
    if (own != MAP_FAILED) munmap(own, bytes);
    if (peer != MAP_FAILED) munmap(peer, bytes);
    state.SkipWithError("mmap of the memfd segment failed");
    return;
  }
  std::memset(own, 1, bytes);
  char* dst = static_cast<char*>(std::aligned_alloc(64, bytes));
  std::memset(dst, 0, bytes);
  // Read through the peer's mapping: its page tables fill here, once, as a
  // peer's do at its first collective on the block.
  std::memcpy(dst, peer, bytes);
  for (auto _ : state) {
    std::memcpy(dst, peer, bytes);
    benchmark::ClobberMemory();
  }
  std::free(dst);
  munmap(own, bytes);
  munmap(peer, bytes);
  setBytes(state, bytes);
}

BENCHMARK(BM_Memcpy)->RangeMultiplier(4)->Range(64 << 10, 64 << 20);
BENCHMARK(BM_ProcessVmReadv)->RangeMultiplier(4)->Range(64 << 10, 64 << 20);
BENCHMARK(BM_SharedSlot)->RangeMultiplier(4)->Range(64 << 10, 64 << 20);
BENCHMARK(BM_SharedSlotPastCache)->RangeMultiplier(4)->Range(64 << 10, 64 << 20);
BENCHMARK(BM_MappedPeer)->RangeMultiplier(4)->Range(64 << 10, 64 << 20);

}  // namespace

BENCHMARK_MAIN();
