// The stand-in CUDA driver's state (fake_cuda.cc): its device memory,
// streams and bookkeeping, shared by the files that define its entry points
// (fake_cuda.cc, fake_cuda_ipc.cc). One library, so one instance of each.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fakecuda {

using CUresult = int;
using CUdeviceptr = unsigned long long;
constexpr CUresult kOk = 0, kInvalidValue = 1, kNotInitialized = 3, kInvalidContext = 201,
                   kInvalidHandle = 400, kNotReady = 600, kNotPermitted = 800;
constexpr size_t kRegion = size_t(512) << 20, kAlign = 256;

// Set on stream worker threads: host functions run there, and CUDA does
// not permit driver calls from a host function.
inline thread_local bool tOnWorker = false;
// fakeCudaSetTaskDelayUs: every stream task starts this late (a slow GPU).
inline std::atomic<unsigned> gTaskDelayUs{0};
// CUDA may run the host functions of all streams one at a time (on one
// driver thread); the stand-in always does, so a host function that blocks
// holds back every other stream's host functions, as it can on a GPU.
inline std::mutex gHostFnMu;

struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> work;
  uint64_t enqueued = 0, done = 0;
  bool stop = false;
  // Between cuStreamBeginCapture and cuStreamEndCapture work is recorded
  // into a graph, not run (the stand-in never launches it).
  bool capturing = false;
  std::vector<std::function<void()>> graph;
  std::thread worker{[this] { run(); }};
  ~Stream() {
    {
      std::lock_guard<std::mutex> g(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  void push(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> g(mu);
      if (capturing) {
        graph.push_back(std::move(f));
        return;
      }
      work.push_back(std::move(f));
      ++enqueued;
    }
    cv.notify_all();
  }
  void run() {
    tOnWorker = true;
    std::unique_lock<std::mutex> g(mu);
    for (;;) {
      cv.wait(g, [&] { return stop || !work.empty(); });
      if (work.empty()) return;
      auto f = std::move(work.front());
      work.pop_front();
      g.unlock();
      if (unsigned us = gTaskDelayUs.load()) std::this_thread::sleep_for(std::chrono::microseconds(us));
      f();
      g.lock();
      ++done;
      cv.notify_all();
    }
  }
};

struct Device {
  std::mutex mu;
  std::atomic<bool> init{false};
  char* dev = nullptr;     // PROT_NONE: what callers hold
  char* shadow = nullptr;  // read-write view of the same pages
  std::map<size_t, size_t> live, freeList;  // offset -> bytes
  std::map<uintptr_t, size_t> registered;   // host ranges (cuMemHostRegister)
  int fd = -1;                              // the memfd: IPC handles name it
  // Other processes' memory opened here (cuIpcOpenMemHandle), by address.
  struct Import {
    char* shadow;
    size_t bytes;
    std::string key;
  };
  std::map<char*, Import> imports;
  std::set<std::string> opened;  // handles mapped here (the Import keeps its key)
  std::set<Stream*> streams;
  Stream* legacy = nullptr;
  std::map<std::string, long> counters;
};

inline Device& D() {
  static Device* d = new Device;  // never destroyed: workers may run at exit
  return *d;
}

inline thread_local void* tCtx = nullptr;
inline char gPrimary;  // the one context's identity
// Active once some thread retained it or made it current.
inline std::atomic<bool> gPrimaryActive{false};

inline void count(const char* what) {
  std::lock_guard<std::mutex> g(D().mu);
  D().counters[what]++;
}

inline CUresult ready() {
  if (!D().init) return kNotInitialized;
  if (tOnWorker) {
    count("called from a host function");
    return kNotPermitted;
  }
  return tCtx ? kOk : kInvalidContext;
}

// The stand-in's view of [p, p + n): the shadow for device memory inside
// one allocation, p itself for host memory; nullptr for a device range
// that leaves its allocation.
// The import holding p (under d.mu), or imports.end().
inline std::map<char*, Device::Import>::iterator importOf(Device& d, const char* p) {
  auto it = d.imports.upper_bound(const_cast<char*>(p));
  if (it == d.imports.begin()) return d.imports.end();
  --it;
  return p < it->first + it->second.bytes ? it : d.imports.end();
}

inline char* view(CUdeviceptr a, size_t n) {
  Device& d = D();
  auto* p = reinterpret_cast<char*>(a);
  std::lock_guard<std::mutex> g(d.mu);
  if (p < d.dev || p >= d.dev + kRegion) {
    auto im = importOf(d, p);
    if (im == d.imports.end()) return p;
    return p + n <= im->first + im->second.bytes ? im->second.shadow + (p - im->first) : nullptr;
  }
  size_t off = size_t(p - d.dev);
  auto it = d.live.upper_bound(off);
  if (it == d.live.begin()) return nullptr;
  --it;
  if (off + n > it->first + it->second) return nullptr;
  return d.shadow + off;
}

inline bool registeredHost(const void* p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> g(D().mu);
  auto it = D().registered.upper_bound(a);
  if (it == D().registered.begin()) return false;
  --it;
  return a < it->first + it->second;
}

inline bool isHost(CUdeviceptr a) {
  auto* p = reinterpret_cast<char*>(a);
  if (p >= D().dev && p < D().dev + kRegion) return false;
  std::lock_guard<std::mutex> g(D().mu);
  return importOf(D(), p) == D().imports.end();
}

// Until everything enqueued on st so far has run.
inline void drain(Stream* st) {
  std::unique_lock<std::mutex> g(st->mu);
  uint64_t target = st->enqueued;
  st->cv.wait(g, [&] { return st->done >= target; });
}

inline Stream* stream(void* s) {
  Device& d = D();
  std::lock_guard<std::mutex> g(d.mu);
  if (!s) {
    if (!d.legacy) d.legacy = new Stream;
    return d.legacy;
  }
  auto* st = static_cast<Stream*>(s);
  return d.streams.count(st) ? st : nullptr;
}

}  // namespace fakecuda
