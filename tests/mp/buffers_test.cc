// Every collective on every kind of buffer a program may pass: malloc'd,
// ncclMemAlloc'd, registered (ncclCommRegister, of malloc'd and of
// ncclMemAlloc'd memory) and symmetric windows (ncclCommWindowRegister),
// in place and out of place, checked exactly with guard elements (the
// collective cases of coll_cases.h, their buffers drawn from the kind under
// test). Sizes: a few elements (through the FIFO slots) and 70001 (pieces
// large enough to travel by reference: cross-memory attach, a mapped
// ncclMemAlloc block, or a window's loads and stores).
// Also the registration records themselves: bad, foreign and twice-used
// handles are errors, not crashes; ncclMemFree of a registered block and
// destroying a communicator release its registrations; a block allocated
// where a freed one was is read correctly, not through a stale mapping.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("buffers"); }

class MemAllocSource : public BufferSource {
 public:
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    return ncclMemAlloc(&p, bytes) == ncclSuccess ? p : nullptr;
  }
  void release(void* p) override { ncclMemFree(p); }
};

class MallocSource : public BufferSource {
 public:
  void* alloc(size_t bytes) override { return std::malloc(bytes); }
  void release(void* p) override { std::free(p); }
};

// Registers every buffer of `inner` with the communicator, deregisters before freeing.
class RegisteredSource : public BufferSource {
 public:
  RegisteredSource(ncclComm_t comm, BufferSource* inner) : comm_(comm), inner_(inner) {}
  void* alloc(size_t bytes) override {
    void* p = inner_->alloc(bytes);
    void* h = nullptr;
    if (!p || ncclCommRegister(comm_, p, bytes, &h) != ncclSuccess) return nullptr;
    handles_[p] = h;
    return p;
  }
  void release(void* p) override {
    if (ncclCommDeregister(comm_, handles_[p]) != ncclSuccess) std::abort();
    handles_.erase(p);
    inner_->release(p);
  }

 private:
  ncclComm_t comm_;
  BufferSource* inner_;
  std::map<void*, void*> handles_;
};

// Buffers carved from one symmetric window per rank: the i-th live buffer
// sits in slot i (lowest free), so ranks that allocate alike get the same
// offsets, as symmetric collectives require.
class WindowSource : public BufferSource {
 public:
  static constexpr size_t kSlots = 8, kSlotBytes = 4 << 20;
  int open(ncclComm_t comm) {
    comm_ = comm;
    MP_NCCL(ncclMemAlloc(&base_, kSlots * kSlotBytes));
    MP_NCCL(ncclCommWindowRegister(comm, base_, kSlots * kSlotBytes, &win_, NCCL_WIN_COLL_SYMMETRIC));
    return 0;
  }
  int close() {
    MP_NCCL(ncclCommWindowDeregister(comm_, win_));
    MP_NCCL(ncclMemFree(base_));
    return 0;
  }
  void* alloc(size_t bytes) override {
    if (bytes > kSlotBytes) return nullptr;
    for (size_t i = 0; i < kSlots; ++i) {
      if (used_[i]) continue;
      used_[i] = true;
      return static_cast<char*>(base_) + i * kSlotBytes;
    }
    return nullptr;
  }
  void release(void* p) override { used_[(static_cast<char*>(p) - static_cast<char*>(base_)) / kSlotBytes] = false; }

 private:
  ncclComm_t comm_ = nullptr;
  void* base_ = nullptr;
  ncclWindow_t win_ = nullptr;
  bool used_[kSlots] = {};
};

int runKind(const Rank& me, const std::string& kind) {
  MallocSource heap;
  MemAllocSource shared;
  RegisteredSource regHeap(me.comm, &heap), regShared(me.comm, &shared);
  WindowSource window;
  BufferSource* src = nullptr;
  if (kind == "memalloc") src = &shared;
  if (kind == "registered") src = &regHeap;
  if (kind == "registered_memalloc") src = &regShared;
  if (kind == "window") {
    MP_TRY(window.open(me.comm));
    src = &window;
  }
  setBufferSource(src);
  int rc = caseEveryShape(me, {7, 70001});
  setBufferSource(nullptr);
  if (kind == "window") MP_TRY(window.close());
  return rc;
}

class MpBuffers : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(MpBuffers, EveryCollectiveExact) {
  auto [kind, n] = GetParam();
  std::string tag = kind + std::to_string(n);
  RunResult res = runRanks(n, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) { return runKind(me, getenv("FERRY_TEST_BUFFER_KIND")); });
  }, loggedOptions(logDir(), tag, "TUNING,SHM", {{"FERRY_TIMEOUT_MS", "30000"}, {"FERRY_TEST_BUFFER_KIND", kind}}, 240));
  EXPECT_RANKS_OK(res);
  // The paths each kind exists for were taken.
  if (kind == "window") {
    EXPECT_EQ(logFilesWith(logDir(), tag, "AllReduce count 70001 elemSize 4: algorithm symmetric"), n);
  }
  if (kind == "memalloc" || kind == "registered_memalloc") {
    EXPECT_GE(logFilesWith(logDir(), tag, "ncclMemAlloc allocation"), 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, MpBuffers,
                         ::testing::Combine(::testing::Values("malloc", "memalloc", "registered",
                                                              "registered_memalloc", "window"),
                                            ::testing::Values(3, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// Handles Ferry did not give out, or gave out and took back, are refused
// with ncclInvalidArgument; a handle of another communicator too.
TEST(MpRegistration, BadHandlesRefused) {
  RunResult res = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      std::vector<char> buf(1 << 16);
      void* h = nullptr;
      MP_NCCL(ncclCommRegister(me.comm, buf.data(), buf.size(), &h));
      int junk = 0;
      MP_EXPECT_RESULT(ncclCommDeregister(me.comm, &junk), ncclInvalidArgument);
      MP_EXPECT_RESULT(ncclCommDeregister(me.comm, nullptr), ncclInvalidArgument);
      ncclComm_t other = nullptr;
      MP_NCCL(ncclCommSplit(me.comm, 0, me.rank, &other, nullptr));
      MP_EXPECT_RESULT(ncclCommDeregister(other, h), ncclInvalidArgument);
      MP_NCCL(ncclCommDeregister(me.comm, h));
      MP_EXPECT_RESULT(ncclCommDeregister(me.comm, h), ncclInvalidArgument);
      // A registration outliving its communicator is released with it.
      void* h2 = nullptr;
      MP_NCCL(ncclCommRegister(other, buf.data(), buf.size(), &h2));
      MP_NCCL(closeComm(other));
      return caseAllReduce(me, RedCase{ncclInt32, TestOp::kSum, me.nranks}, 1000, false);
    });
  }, loggedOptions(logDir(), "badhandle", "INIT", {}, 60));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "badhandle", "handle is not one ncclCommRegister returned"), 2);
  EXPECT_EQ(logFilesWith(logDir(), "badhandle", "handle was registered with another communicator"), 2);
  EXPECT_EQ(logFilesWith(logDir(), "badhandle", "handle was deregistered already"), 2);
}

// ncclMemFree of a block still registered releases the registration (its
// later deregister is harmless); the next block, often at the same address
// and fd number, is read by peers as the new memory, exactly.
TEST(MpRegistration, FreeWhileRegistered) {
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      const size_t count = 200000, bytes = count * sizeof(int32_t);
      RedCase c{ncclInt32, TestOp::kSum, me.nranks};
      for (int round = 0; round < 3; ++round) {
        void *in = nullptr, *out = nullptr, *hIn = nullptr, *hOut = nullptr;
        MP_NCCL(ncclMemAlloc(&in, bytes));
        MP_NCCL(ncclMemAlloc(&out, bytes));
        MP_NCCL(ncclCommRegister(me.comm, in, bytes, &hIn));
        MP_NCCL(ncclCommRegister(me.comm, out, bytes, &hOut));
        for (size_t i = 0; i < count; ++i) encodeValue(ncclInt32, redInput(c, me.rank, i) + round, in, i);
        for (int coll = 0; coll < 2; ++coll) {
          MP_NCCL(coll == 0 ? ncclAllReduce(in, out, count, ncclInt32, ncclSum, me.comm, nullptr)
                            : ncclBroadcast(in, out, count, ncclInt32, round % me.nranks, me.comm, nullptr));
          for (size_t i = 0; i < count; ++i) {
            double want = coll == 0 ? redExpected(c, i) + me.nranks * round
                                    : redInput(c, round % me.nranks, i) + round;
            MP_CHECK(decodeValue(ncclInt32, out, i) == want, "round %d coll %d element %zu", round, coll, i);
          }
        }
        MP_NCCL(ncclMemFree(in));   // still registered
        MP_NCCL(ncclMemFree(out));
        MP_NCCL(ncclCommDeregister(me.comm, hIn));
        MP_NCCL(ncclCommDeregister(me.comm, hOut));
      }
      return 0;
    });
  }, loggedOptions(logDir(), "freereg", "INIT,SHM", {{"NCCL_ALGO", "ring"}}, 120));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "freereg", "was still registered (1 registration released)"), 3);
  EXPECT_EQ(logFilesWith(logDir(), "freereg", "was already released"), 3);
}

}  // namespace
}  // namespace ferry::mp
