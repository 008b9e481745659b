// testdev: a stand-in discrete device for machines without one (issue 14).
//
// Its memory is a memfd mapped twice: the addresses handed out are mapped
// PROT_NONE, so any load or store by the host faults (a library that
// touches device memory instead of going through the seam crashes the
// test), and a second read-write view at another address is what the
// backend's own copies and kernels use. Work runs on one worker thread per
// stream, in order, optionally slowed by a delay per task, so a test sees a
// host call return before its device work has run.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "accel/accelerator.h"

namespace ferry::accel {

class TestStream;

class TestDevice final : public Accelerator {
 public:
  // Address space reserved for the device's memory (pages exist only once
  // written through the backend).
  static constexpr size_t kRegionBytes = size_t(256) << 20;
  static constexpr size_t kAlign = 256;

  static Result<std::unique_ptr<TestDevice>> create();
  ~TestDevice() override;

  const char* name() const override { return "testdev"; }
  bool owns(const void* p) const override;
  Status checkRange(const void* p, size_t bytes) const override { return view(p, bytes).status(); }
  Result<void*> alloc(size_t bytes) override;
  Status free(void* p) override;
  Result<StreamHandle> createStream() override;
  Status destroyStream(StreamHandle s) override;
  bool ownsStream(StreamHandle h) override;
  Status copyAsync(void* dst, const void* src, size_t bytes, StreamHandle s) override;
  Status reduceAsync(void* dst, const void* a, const void* b, size_t count, kernels::DType t,
                     kernels::Op op, StreamHandle s) override;
  bool divides() const override { return true; }
  Status divideAsync(void* dst, const void* src, size_t count, kernels::DType t, uint64_t n,
                     StreamHandle h) override;
  Status hostFnAsync(StreamHandle s, std::function<void()> fn) override;
  Status waitFlagAsync(StreamHandle s, const HostFlag* flag, uint32_t value,
                       int64_t timeoutMs) override;
  // IPC (test_device_ipc.cc): the handle names this process's memfd and
  // the range's offset in it; an importer maps it twice, as its own memory
  // is (PROT_NONE where users point, a shadow for the backend's work).
  Status exportMemory(const void* p, size_t bytes, IpcHandle* out) override;
  Result<void*> importMemory(const IpcHandle& h, size_t bytes) override;
  Status closeImported(void* p) override;
  Result<bool> idle(StreamHandle s) override;
  Status synchronize(StreamHandle s, int64_t timeoutMs) override;

  // Every task of every stream sleeps this long before it runs (tests of
  // the stream contract).
  void setTaskDelayUs(int64_t us) { delayUs_.store(us); }
  // Bytes allocated now.
  size_t allocatedBytes() const;

 private:
  TestDevice(int fd, char* device, char* shadow);
  // The backend's view of [p, p + bytes): p itself for host memory, its
  // shadow for device memory; an error for a device range that leaves its
  // allocation.
  Result<char*> view(const void* p, size_t bytes) const;
  Result<TestStream*> stream(StreamHandle s);

  // Another process's memory mapped here (importMemory), by the address
  // handed out.
  struct Import {
    char* device;     // PROT_NONE mapping (page-aligned)
    char* shadow;     // its read-write twin
    size_t mapBytes;  // both mappings' length
    size_t lead;      // the handed-out address is device + lead
    size_t bytes;
  };
  bool inRegion(const char* c) const { return c >= device_ && c < device_ + kRegionBytes; }
  // The import holding c (under mu_), or null.
  const Import* importOf(const char* c) const;

  int fd_;
  std::map<const char*, Import> imports_;  // by handed-out address
  char* device_;  // PROT_NONE: the addresses users hold
  char* shadow_;  // read-write: the backend's view of the same pages
  mutable std::mutex mu_;
  std::map<size_t, size_t> live_;  // offset -> bytes
  std::map<size_t, size_t> free_;  // offset -> bytes, coalesced
  std::set<TestStream*> streams_;
  std::unique_ptr<TestStream> default_;
  std::atomic<int64_t> delayUs_{0};
  std::atomic<int64_t> engineFreeNs_{0};  // engineBook: the copy engine's clock
  int64_t engineBook(size_t bytes);
};

}  // namespace ferry::accel
