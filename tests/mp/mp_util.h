// Helpers shared by the multi-process suites: datatype codecs for exact small
// integers (including half, bfloat16 and both fp8 formats), value generators
// whose reductions are exact in every type, buffer checks, and check macros
// that record a message for the parent and return a failure code.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/mp/harness.h"

namespace ferry::mp {

// ---- Datatypes ----
constexpr ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                        ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                        ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
size_t dtypeSize(ncclDataType_t dt);
const char* dtypeName(ncclDataType_t dt);
bool dtypeSigned(ncclDataType_t dt);
bool dtypeFloat(ncclDataType_t dt);
// Largest L such that every integer in [-L, L] (or [0, L] if unsigned) is
// exact in dt; capped at 1<<20 for the wide types.
int64_t dtypeExactLimit(ncclDataType_t dt);
// Stores v (must be exactly representable: aborts otherwise, a test bug).
void encodeValue(ncclDataType_t dt, double v, void* base, size_t idx);
double decodeValue(ncclDataType_t dt, const void* base, size_t idx);

// ---- Reduction ops as the tests see them (PreMulSum needs creating) ----
enum class TestOp { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };
constexpr TestOp kAllOps[] = {TestOp::kSum, TestOp::kProd, TestOp::kMax,
                              TestOp::kMin, TestOp::kAvg,  TestOp::kPreMulSum};
const char* opName(TestOp op);
constexpr double kPreMulScalar = 2.0;

struct RedCase {
  ncclDataType_t dt;
  TestOp op;
  int nranks;
};
// False when no input pattern gives an exact result (float avg with a
// non-power-of-two rank count: NCCL premultiplies by 1/nranks).
bool redCaseExact(const RedCase& c);
// The reductions the forced-algorithm tests check: int32 sum and avg, float
// max, bfloat16 sum, half premulsum (all exact on any rank count).
std::vector<RedCase> standardReductions(int nranks);
// Input of `rank` at element i; the reduction over ranks is exact in c.dt.
double redInput(const RedCase& c, int rank, size_t i);
// The exact reduction over all ranks of redInput(c, r, i).
double redExpected(const RedCase& c, size_t i);

// Creates the ncclRedOp_t for op (PreMulSum: scalar kPreMulScalar, host
// immediate); releaseOp destroys it again. Both return ncclResult_t.
ncclResult_t acquireOp(TestOp op, ncclDataType_t dt, ncclComm_t comm, ncclRedOp_t* out);
ncclResult_t releaseOp(TestOp op, ncclRedOp_t nop, ncclComm_t comm);

// Value for data-movement collectives (no reduction): distinct-ish small
// integers exact in dt, varying with the source rank and element index.
double moveValue(ncclDataType_t dt, int srcRank, size_t i);
// Pre-fill value for receive buffers: the extreme exact value of dt, which
// the generators above rarely produce, so an unwritten element shows.
double sentinelValue(ncclDataType_t dt);

// ---- Host buffers (malloc, or a test's BufferSource) ----
// Where HostBuf memory comes from: tests of buffer kinds (buffers_test.cc)
// put ncclMemAlloc'd, registered or window memory under every collective
// case. nullptr (the default): malloc. Per process, i.e. per rank.
class BufferSource {
 public:
  virtual ~BufferSource() = default;
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* p) = 0;
};
void setBufferSource(BufferSource* s);
// Device mode (per process): every HostBuf is device memory of the
// FERRY_DEVICE backend (ferry/device.h) behind a host mirror. data() and
// at() upload what set() changed (on the default stream) and hand out the
// device address; get() downloads once the device may have changed (after
// the default stream's work so far: collectives enqueued on it included).
// The cases of coll_cases.h then run unchanged on device memory.
void setDeviceBuffers(bool on);
bool deviceBuffers();

class HostBuf {
 public:
  HostBuf(ncclDataType_t dt, size_t count);
  ~HostBuf();
  HostBuf(const HostBuf&) = delete;
  HostBuf& operator=(const HostBuf&) = delete;
  void* data() { return at(0); }
  const void* data() const { return const_cast<HostBuf*>(this)->at(0); }
  // Pointer to element i (for in-place offsets).
  void* at(size_t i);
  size_t count() const { return count_; }
  ncclDataType_t dtype() const { return dt_; }
  void set(size_t i, double v);
  double get(size_t i) const;
  void fill(double v);
  void fill(const std::function<double(size_t)>& f);

 private:
  void download() const;  // device mode: the mirror catches up (synchronous)
  ncclDataType_t dt_;
  size_t count_;
  size_t bytes_;
  void* p_;                    // the host copy (device mode: the mirror)
  void* dev_ = nullptr;        // device mode: the device buffer
  mutable bool hostNewer_ = false;    // set() since the last upload
  mutable bool deviceNewer_ = false;  // handed out since the last download
};

// Checks buf[off + k] == expect(k) for k < n. Logs up to 4 mismatches with
// `what`; returns true when all match.
bool checkBuf(const HostBuf& buf, size_t off, size_t n, const std::function<double(size_t)>& expect,
              const std::string& what);

// ---- Communicators ----
ncclResult_t initComm(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank);
// Finalize + destroy; returns the first error.
ncclResult_t closeComm(ncclComm_t comm);

std::string resultName(ncclResult_t r);

// How many files <dir>/<tag>.* (per-rank NCCL_DEBUG_FILE logs) contain `text`;
// -1 if that cannot be found out.
int logFilesWith(const std::string& dir, const std::string& tag, const std::string& text);
// The most lines containing `text` in any one of those files; -1 as above.
int maxLinesWith(const std::string& dir, const std::string& tag, const std::string& text);

// A fresh directory /tmp/ferry-<name>-XXXXXX for a test binary's per-rank
// logs, made at the first call for that name.
const std::string& testLogDir(const std::string& name);

// FERRY_TIMEOUT_MS 20 s and `subsys` logged at INFO to <dir>/<tag>.<pid>;
// `env` adds to (and may override) these.
RunOptions loggedOptions(const std::string& dir, const std::string& tag, const std::string& subsys, Env env,
                         int timeoutSec);

// Puts rank r of nranks on simulated node `hostOf(r)` (NCCL_HOSTID
// <tag>-node-<hostOf(r)>): the ranks of different nodes talk over the network.
void onSimulatedNodes(RunOptions* o, const std::string& tag, int nranks, const std::function<int(int)>& hostOf);

// Rank `victim` is SIGKILLed killDelayMs after it calls harnessSignalReady();
// FERRY_TIMEOUT_MS as given; the harness watchdog at timeoutSec.
RunOptions killAtReadyOptions(int victim, int killDelayMs, int64_t ferryTimeoutMs, int timeoutSec);

// nranks on simulated nodes of two ranks each (NCCL_HOSTID <tag>-node-<r/2>),
// 64 KiB network slots, FERRY_TIMEOUT_MS 20 s, INIT,NET INFO logged to
// <dir>/<tag>.<pid>; `env` adds to (and may override) the rest.
RunOptions pairedNodesOptions(const std::string& dir, const std::string& tag, Env env, int nranks,
                              int timeoutSec);

}  // namespace ferry::mp

// Inside a rank body (or a helper returning int): on failure, record where
// and why for the parent, then return 1.
#define MP_NCCL(call)                                                                             \
  do {                                                                                            \
    ncclResult_t mpRes_ = (call);                                                                 \
    if (mpRes_ != ncclSuccess) {                                                                  \
      ::ferry::mp::harnessMessage("%s:%d: %s returned %s", __FILE__, __LINE__, #call,             \
                                  ::ferry::mp::resultName(mpRes_).c_str());                       \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

#define MP_EXPECT_RESULT(call, want)                                                              \
  do {                                                                                            \
    ncclResult_t mpRes_ = (call);                                                                 \
    if (mpRes_ != (want)) {                                                                       \
      ::ferry::mp::harnessMessage("%s:%d: %s returned %s, expected %s", __FILE__, __LINE__,       \
                                  #call, ::ferry::mp::resultName(mpRes_).c_str(),                 \
                                  ::ferry::mp::resultName(want).c_str());                         \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

// MP_CHECK(cond) or MP_CHECK(cond, "fmt", args...)
#define MP_CHECK(cond, ...)                                                                       \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      ::ferry::mp::harnessMessage("%s:%d: check failed: %s", __FILE__, __LINE__, #cond);          \
      ::ferry::mp::harnessMessage("  " __VA_ARGS__);                                              \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

// Propagates a failing int-returning helper.
#define MP_TRY(expr)                 \
  do {                               \
    int mpRc_ = (expr);              \
    if (mpRc_ != 0) return mpRc_;    \
  } while (0)
