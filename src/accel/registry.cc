// The accelerator backends, by name, from one explicit list.
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "accel/accelerator.h"
#include "accel/cuda_accel.h"
#include "accel/host_accel.h"
#include "accel/test_device.h"
#include "core/config.h"
#include "core/log.h"

namespace ferry::accel {
namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Accelerator> (*make)();
};

std::unique_ptr<Accelerator> makeHost() { return std::make_unique<HostAccelerator>(); }
std::unique_ptr<Accelerator> makeTestDevice() {
  Result<std::unique_ptr<TestDevice>> d = TestDevice::create();
  if (!d.isOk()) {
    FERRY_WARN("accelerator testdev unavailable: %s", d.status().message().c_str());
    return nullptr;
  }
  return d.take();
}

// Most machines have no CUDA: its absence is an INFO line, not a WARN.
// probe() asks again while the answer may change (the process does not use
// CUDA yet: kInvalidUsage); no driver, or no device, is final. The reason is
// logged the first time only.
std::unique_ptr<Accelerator> makeCuda() {
  static std::atomic<bool> logged{false}, final{false};
  if (final.load()) return nullptr;
  Result<std::unique_ptr<CudaAccelerator>> d = CudaAccelerator::create();
  if (!d.isOk()) {
    if (!logged.exchange(true))
      FERRY_INFO(log::kInit, "accelerator cuda unavailable: %s", d.status().message().c_str());
    if (d.status().code() != Code::kInvalidUsage) final = true;
    return nullptr;
  }
  return d.take();
}

// The list: host first (it owns whatever no device claims).
const Entry kBackends[] = {
    {"host", makeHost},
    {"testdev", makeTestDevice},
    {"cuda", makeCuda},
};
constexpr size_t kCount = sizeof(kBackends) / sizeof(kBackends[0]);

struct Created {
  std::mutex mu;
  std::unique_ptr<Accelerator> backend[kCount];
  bool tried[kCount] = {};
};

// Never destroyed: streams' worker threads must not be joined from static
// destructors while other threads may still use a backend.
Created& created() {
  static Created* c = new Created;
  return *c;
}

}  // namespace

std::atomic<bool> gAnyDevice{false};

Accelerator* find(const char* name) {
  Created& c = created();
  for (size_t i = 0; i < kCount; ++i) {
    if (std::strcmp(kBackends[i].name, name) != 0) continue;
    std::lock_guard<std::mutex> g(c.mu);
    if (!c.tried[i]) {
      c.backend[i] = kBackends[i].make();
      c.tried[i] = true;
      if (i > 0 && c.backend[i]) gAnyDevice.store(true, std::memory_order_release);
    }
    return c.backend[i].get();
  }
  return nullptr;
}

Accelerator& host() { return *find("host"); }

Accelerator& ownerOf(const void* p) {
  Created& c = created();
  {
    std::lock_guard<std::mutex> g(c.mu);
    for (size_t i = 1; i < kCount; ++i)
      if (c.backend[i] && c.backend[i]->owns(p)) return *c.backend[i];
  }
  return host();
}

// FERRY_DEVICE's backend is looked up once; without it, CUDA is asked each
// time (the program may start using it after the first call).
Accelerator* configured() {
  static const std::string name = config::getString(config::Param::kDevice);
  if (name.empty()) {
    probe();
    return find("cuda");
  }
  static Accelerator* const dev = [] () -> Accelerator* {
    Accelerator* a = name == "host" ? nullptr : find(name.c_str());
    if (!a) FERRY_WARN("FERRY_DEVICE=%s: no such device backend (known: testdev, cuda)", name.c_str());
    return a;
  }();
  return dev;
}

// Again at every communicator creation until it succeeds: a program may
// start using CUDA after its first communicator.
void probe() {
  Created& c = created();
  std::lock_guard<std::mutex> g(c.mu);
  for (size_t i = 1; i < kCount; ++i) {
    if (std::strcmp(kBackends[i].name, "cuda") != 0 || c.backend[i]) continue;
    c.backend[i] = kBackends[i].make();
    c.tried[i] = true;
    if (c.backend[i]) gAnyDevice.store(true, std::memory_order_release);
  }
}

Status Accelerator::divideAsync(void*, const void*, size_t, kernels::DType, uint64_t, StreamHandle) {
  return invalidUsage(std::string(name()) + ": no division kernel (Avg)");
}

Status Accelerator::exportMemory(const void*, size_t, IpcHandle*) {
  return invalidUsage(std::string(name()) + ": sharing memory with other processes is not supported");
}

Result<void*> Accelerator::importMemory(const IpcHandle&, size_t) {
  return invalidUsage(std::string(name()) + ": mapping another process's memory is not supported");
}

Status Accelerator::closeImported(void*) {
  return invalidUsage(std::string(name()) + ": closeImported without importMemory");
}

Accelerator* streamOwner(StreamHandle s) {
  Created& c = created();
  std::lock_guard<std::mutex> g(c.mu);
  for (size_t i = 1; i < kCount; ++i)
    if (c.backend[i] && c.backend[i]->ownsStream(s)) return c.backend[i].get();
  return nullptr;
}

}  // namespace ferry::accel
