// The accelerator backends, by name, from one explicit list.
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
std::unique_ptr<Accelerator> makeCuda() {
  Result<std::unique_ptr<CudaAccelerator>> d = CudaAccelerator::create();
  if (!d.isOk()) {
    FERRY_INFO(log::kInit, "accelerator cuda unavailable: %s", d.status().message().c_str());
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

Accelerator* configured() {
  static Accelerator* const dev = [] () -> Accelerator* {
    std::string name = config::getString(config::Param::kDevice);
    if (name.empty()) {
      probe();
      return find("cuda");
    }
    Accelerator* a = name == "host" ? nullptr : find(name.c_str());
    if (!a) FERRY_WARN("FERRY_DEVICE=%s: no such device backend (known: testdev)", name.c_str());
    return a;
  }();
  return dev;
}

void probe() {
  static std::once_flag once;
  std::call_once(once, [] { (void)find("cuda"); });
}

Accelerator* streamOwner(StreamHandle s) {
  Created& c = created();
  std::lock_guard<std::mutex> g(c.mu);
  for (size_t i = 1; i < kCount; ++i)
    if (c.backend[i] && c.backend[i]->ownsStream(s)) return c.backend[i].get();
  return nullptr;
}

}  // namespace ferry::accel
