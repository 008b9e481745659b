#include "accel/test_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "accel/test_stream.h"
#include "core/config.h"
#include "core/log.h"

namespace ferry::accel {

Result<std::unique_ptr<TestDevice>> TestDevice::create() {
  int fd = memfd_create("ferry-testdev", MFD_CLOEXEC);
  if (fd < 0) return systemError(std::string("testdev: memfd_create: ") + strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(kRegionBytes)) != 0) {
    int e = errno;
    close(fd);
    return systemError(std::string("testdev: sizing its memory: ") + strerror(e));
  }
  void* dev = mmap(nullptr, kRegionBytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  void* shadow = mmap(nullptr, kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (dev == MAP_FAILED || shadow == MAP_FAILED) {
    int e = errno;
    if (dev != MAP_FAILED) munmap(dev, kRegionBytes);
    if (shadow != MAP_FAILED) munmap(shadow, kRegionBytes);
    close(fd);
    return systemError(std::string("testdev: mapping its memory: ") + strerror(e));
  }
  return std::unique_ptr<TestDevice>(
      new TestDevice(fd, static_cast<char*>(dev), static_cast<char*>(shadow)));
}

TestDevice::TestDevice(int fd, char* device, char* shadow)
    : fd_(fd), device_(device), shadow_(shadow) {
  free_[0] = kRegionBytes;
}

TestDevice::~TestDevice() {
  default_.reset();
  for (TestStream* s : streams_) delete s;
  munmap(device_, kRegionBytes);
  munmap(shadow_, kRegionBytes);
  close(fd_);
}

bool TestDevice::owns(const void* p) const {
  auto c = static_cast<const char*>(p);
  if (inRegion(c)) return true;
  std::lock_guard<std::mutex> g(mu_);
  return importOf(c) != nullptr;
}

size_t TestDevice::allocatedBytes() const {
  std::lock_guard<std::mutex> g(mu_);
  size_t n = 0;
  for (const auto& [off, bytes] : live_) n += bytes;
  return n;
}

Result<void*> TestDevice::alloc(size_t bytes) {
  size_t want = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  std::lock_guard<std::mutex> g(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < want) continue;
    size_t off = it->first, left = it->second - want;
    free_.erase(it);
    if (left) free_[off + want] = left;
    live_[off] = want;
    return static_cast<void*>(device_ + off);
  }
  return systemError("testdev: out of device memory for " + std::to_string(bytes) + " bytes");
}

Status TestDevice::free(void* p) {
  if (!p) return Status::ok();
  if (!owns(p)) return invalidArgument("testdev: free of a pointer that is not device memory");
  size_t off = static_cast<size_t>(static_cast<char*>(p) - device_);
  std::lock_guard<std::mutex> g(mu_);
  auto it = live_.find(off);
  if (it == live_.end()) return invalidArgument("testdev: free of a pointer that was not allocated (or freed twice)");
  size_t bytes = it->second;
  live_.erase(it);
  // Give the pages back, so freed memory reads as zero, as a fresh
  // allocation on a real device need not but a test may rely on not seeing
  // old data by accident; then coalesce with the neighbours.
  madvise(shadow_ + off, bytes, MADV_REMOVE);
  auto next = free_.lower_bound(off);
  if (next != free_.end() && off + bytes == next->first) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      prev->second += bytes;
      return Status::ok();
    }
  }
  free_[off] = bytes;
  return Status::ok();
}

Result<char*> TestDevice::view(const void* p, size_t bytes) const {
  auto c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> g(mu_);
  if (!inRegion(c)) {
    const Import* im = importOf(c);
    if (!im) return const_cast<char*>(c);  // host memory: used as is
    size_t off = static_cast<size_t>(c - (im->device + im->lead));
    if (off + bytes > im->bytes)
      return invalidArgument("testdev: " + std::to_string(bytes) + " bytes at offset " +
                             std::to_string(off) + " leave another process's memory of " +
                             std::to_string(im->bytes) + " bytes mapped here");
    return im->shadow + im->lead + off;
  }
  size_t off = static_cast<size_t>(c - device_);
  auto it = live_.upper_bound(off);
  if (it == live_.begin()) return invalidArgument("testdev: a device pointer outside any allocation");
  --it;
  if (off + bytes > it->first + it->second)
    return invalidArgument("testdev: " + std::to_string(bytes) + " bytes at offset " +
                           std::to_string(off - it->first) + " leave an allocation of " +
                           std::to_string(it->second));
  return shadow_ + off;
}

Result<StreamHandle> TestDevice::createStream() {
  auto* s = new TestStream(&delayUs_);
  std::lock_guard<std::mutex> g(mu_);
  streams_.insert(s);
  return static_cast<StreamHandle>(s);
}

Status TestDevice::destroyStream(StreamHandle h) {
  auto* s = static_cast<TestStream*>(h);
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!streams_.erase(s)) return invalidArgument("testdev: destroyStream of an unknown stream");
  }
  delete s;  // runs what is queued first
  return Status::ok();
}

Result<TestStream*> TestDevice::stream(StreamHandle h) {
  std::lock_guard<std::mutex> g(mu_);
  if (!h) {
    if (!default_) default_ = std::make_unique<TestStream>(&delayUs_);
    return default_.get();
  }
  auto* s = static_cast<TestStream*>(h);
  if (!streams_.count(s)) return invalidArgument("testdev: an unknown stream");
  return s;
}

Status TestDevice::copyAsync(void* dst, const void* src, size_t bytes, StreamHandle h) {
  FERRY_ASSIGN(TestStream * s, stream(h));
  FERRY_ASSIGN(char* d, view(dst, bytes));
  FERRY_ASSIGN(char* from, view(src, bytes));
  s->enqueue([this, d, from, bytes] {
    const int64_t end = engineBook(bytes);
    if (bytes) std::memmove(d, from, bytes);
    if (end) std::this_thread::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(end)));
  });
  return Status::ok();
}

// A copy engine's pace (FERRY_TESTDEV_COPY_MBPS): a copy that starts now
// ends no earlier than bytes / rate after the later of now and the end of
// the engine's previous copy, as DMA on a GPU would, and the wait takes no
// core. Returns that end (steady clock, ns; 0: no pace). A copy that comes
// within kBackToBackNs of the previous one's end continues from that end:
// the sleep that ended it overshoots (timer slack, a wake-up: 50-150 us
// here), which a real engine would not, and back-to-back pieces would
// otherwise each pay it.
int64_t TestDevice::engineBook(size_t bytes) {
  constexpr int64_t kBackToBackNs = 300000;
  static const int64_t mbps = config::getInt(config::Param::kTestdevCopyMbps);
  if (mbps <= 0 || bytes == 0) return 0;
  const int64_t now = std::chrono::nanoseconds(std::chrono::steady_clock::now().time_since_epoch()).count();
  const int64_t busy = static_cast<int64_t>(bytes) * 1000 / mbps;
  int64_t free = engineFreeNs_.load();
  int64_t end;
  do {
    end = (now - free < kBackToBackNs ? free : now) + busy;
  } while (!engineFreeNs_.compare_exchange_weak(free, end));
  return end;
}

Status TestDevice::reduceAsync(void* dst, const void* a, const void* b, size_t count,
                               kernels::DType t, kernels::Op op, StreamHandle h) {
  size_t bytes = count * kernels::sizeOf(t);
  FERRY_ASSIGN(TestStream * s, stream(h));
  FERRY_ASSIGN(char* d, view(dst, bytes));
  FERRY_ASSIGN(char* va, view(a, bytes));
  FERRY_ASSIGN(char* vb, view(b, bytes));
  s->enqueue([=] { kernels::reduce(d, va, vb, count, t, op); });
  return Status::ok();
}

Status TestDevice::divideAsync(void* dst, const void* src, size_t count, kernels::DType t, uint64_t n,
                               StreamHandle h) {
  size_t bytes = count * kernels::sizeOf(t);
  FERRY_ASSIGN(TestStream * s, stream(h));
  FERRY_ASSIGN(char* d, view(dst, bytes));
  FERRY_ASSIGN(char* v, view(src, bytes));
  s->enqueue([=] { kernels::divide(d, v, count, t, n); });
  return Status::ok();
}

Status TestDevice::hostFnAsync(StreamHandle h, std::function<void()> fn) {
  FERRY_ASSIGN(TestStream * s, stream(h));
  s->enqueue(std::move(fn));
  return Status::ok();
}

// The worker waits, as a GPU's stream would at cuStreamWaitValue32.
Status TestDevice::waitFlagAsync(StreamHandle h, const HostFlag* flag, uint32_t value,
                                 int64_t timeoutMs) {
  FERRY_ASSIGN(TestStream * s, stream(h));
  s->enqueue([flag, value, timeoutMs] {
    if (!flag->waitAtLeast(value, timeoutMs))
      FERRY_WARN("testdev stream: a wait for a host flag gave up after %lld ms; the stream goes on",
                 static_cast<long long>(timeoutMs));
  });
  return Status::ok();
}

bool TestDevice::ownsStream(StreamHandle h) {
  if (!h) return true;
  std::lock_guard<std::mutex> g(mu_);
  return streams_.count(static_cast<TestStream*>(h)) > 0;
}

Result<bool> TestDevice::idle(StreamHandle h) {
  FERRY_ASSIGN(TestStream * s, stream(h));
  return s->idle();
}

Status TestDevice::synchronize(StreamHandle h, int64_t timeoutMs) {
  FERRY_ASSIGN(TestStream * s, stream(h));
  return s->drain(timeoutMs);
}

}  // namespace ferry::accel
