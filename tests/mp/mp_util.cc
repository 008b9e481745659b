// Datatype codecs, exact value generators and checks for the mp suites.
#include "tests/mp/mp_util.h"

#include <ferry/device.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace ferry::mp {
namespace {

struct MiniFloat {
  int ebits;
  int mbits;
  bool ieeeInf;  // exponent all-ones is inf/NaN (half, bf16, e5m2); e4m3 is "fn"
};

MiniFloat miniFormat(ncclDataType_t dt) {
  switch (dt) {
    case ncclFloat16: return {5, 10, true};
    case ncclBfloat16: return {8, 7, true};
    case ncclFloat8e4m3: return {4, 3, false};
    default: return {5, 2, true};  // ncclFloat8e5m2
  }
}

// Exact encoding of v; aborts if v is not representable (the test chose a bad value).
uint32_t encodeMini(double v, MiniFloat f) {
  const int bias = (1 << (f.ebits - 1)) - 1;
  uint32_t sign = std::signbit(v) ? 1u : 0u;
  double a = std::fabs(v);
  uint32_t bits = sign << (f.ebits + f.mbits);
  if (a == 0) return bits;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;
  int biased = exp + bias;
  double mant;
  if (biased <= 0) {
    biased = 0;
    mant = std::ldexp(a, f.mbits - (1 - bias));
  } else {
    mant = (std::ldexp(a, -exp) - 1.0) * (1 << f.mbits);
  }
  int maxBiased = (1 << f.ebits) - (f.ieeeInf ? 2 : 1);
  if (mant != std::floor(mant) || biased > maxBiased) {
    fprintf(stderr, "mp_util: %g is not exact in a %d/%d minifloat\n", v, f.ebits, f.mbits);
    std::abort();
  }
  return bits | (uint32_t(biased) << f.mbits) | uint32_t(mant);
}

double decodeMini(uint32_t bits, MiniFloat f) {
  const int bias = (1 << (f.ebits - 1)) - 1;
  uint32_t mantMask = (1u << f.mbits) - 1;
  uint32_t expMask = (1u << f.ebits) - 1;
  bool neg = (bits >> (f.ebits + f.mbits)) & 1;
  uint32_t exp = (bits >> f.mbits) & expMask;
  uint32_t mant = bits & mantMask;
  double v;
  if (f.ieeeInf && exp == expMask) {
    v = mant ? NAN : INFINITY;
  } else if (!f.ieeeInf && exp == expMask && mant == mantMask) {
    v = NAN;
  } else if (exp == 0) {
    v = std::ldexp(double(mant), 1 - bias - f.mbits);
  } else {
    v = std::ldexp(1.0 + double(mant) / (1 << f.mbits), int(exp) - bias);
  }
  return neg ? -v : v;
}

template <typename T>
void storeAs(void* base, size_t idx, double v) {
  T t = static_cast<T>(v);
  std::memcpy(static_cast<char*>(base) + idx * sizeof(T), &t, sizeof(T));
}
template <typename T>
double loadAs(const void* base, size_t idx) {
  T t;
  std::memcpy(&t, static_cast<const char*>(base) + idx * sizeof(T), sizeof(T));
  return static_cast<double>(t);
}

bool isPow2(int n) { return n > 0 && (n & (n - 1)) == 0; }
int ilog2(int64_t x) {
  int k = 0;
  while ((int64_t(1) << (k + 1)) <= x) ++k;
  return k;
}

// A hash of (rank, i) that walks through residues of small moduli.
uint64_t mix(int rank, size_t i) { return uint64_t(i) * 7 + uint64_t(rank) * 3; }

// Sum-like input bounded so that scale * (sum over ranks) stays within the
// exact range of the type, including all partial sums.
double boundedSumInput(const RedCase& c, int scale, int rank, size_t i) {
  int64_t lim = dtypeExactLimit(c.dt);
  int64_t a = lim / (int64_t(scale) * c.nranks);
  if (a > 3) a = 3;
  if (a < 1) a = 1;
  int64_t active = lim / (int64_t(scale) * a);  // ranks allowed a non-zero input
  if (rank >= active) return 0;
  uint64_t h = mix(rank, i);
  if (dtypeSigned(c.dt)) return double(int64_t(h % uint64_t(2 * a + 1)) - a);
  return double(h % uint64_t(a + 1));
}

}  // namespace

size_t dtypeSize(ncclDataType_t dt) {
  switch (dt) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 1;
  }
}

const char* dtypeName(ncclDataType_t dt) {
  switch (dt) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "half";
    case ncclFloat32: return "float";
    case ncclFloat64: return "double";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat8e4m3: return "fp8e4m3";
    case ncclFloat8e5m2: return "fp8e5m2";
    default: return "?";
  }
}

bool dtypeSigned(ncclDataType_t dt) {
  return !(dt == ncclUint8 || dt == ncclUint32 || dt == ncclUint64);
}

bool dtypeFloat(ncclDataType_t dt) {
  return dt == ncclFloat16 || dt == ncclFloat32 || dt == ncclFloat64 || dt == ncclBfloat16 ||
         dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2;
}

int64_t dtypeExactLimit(ncclDataType_t dt) {
  switch (dt) {
    case ncclInt8: return 127;
    case ncclUint8: return 255;
    case ncclFloat16: return 2048;
    case ncclBfloat16: return 256;
    case ncclFloat8e4m3: return 16;
    case ncclFloat8e5m2: return 8;
    default: return int64_t(1) << 20;
  }
}

void encodeValue(ncclDataType_t dt, double v, void* base, size_t idx) {
  switch (dt) {
    case ncclInt8: storeAs<int8_t>(base, idx, v); break;
    case ncclUint8: storeAs<uint8_t>(base, idx, v); break;
    case ncclInt32: storeAs<int32_t>(base, idx, v); break;
    case ncclUint32: storeAs<uint32_t>(base, idx, v); break;
    case ncclInt64: storeAs<int64_t>(base, idx, v); break;
    case ncclUint64: storeAs<uint64_t>(base, idx, v); break;
    case ncclFloat32: storeAs<float>(base, idx, v); break;
    case ncclFloat64: storeAs<double>(base, idx, v); break;
    case ncclFloat16: case ncclBfloat16: {
      uint16_t b = uint16_t(encodeMini(v, miniFormat(dt)));
      std::memcpy(static_cast<char*>(base) + idx * 2, &b, 2);
      break;
    }
    default: {
      uint8_t b = uint8_t(encodeMini(v, miniFormat(dt)));
      static_cast<uint8_t*>(base)[idx] = b;
    }
  }
}

double decodeValue(ncclDataType_t dt, const void* base, size_t idx) {
  switch (dt) {
    case ncclInt8: return loadAs<int8_t>(base, idx);
    case ncclUint8: return loadAs<uint8_t>(base, idx);
    case ncclInt32: return loadAs<int32_t>(base, idx);
    case ncclUint32: return loadAs<uint32_t>(base, idx);
    case ncclInt64: return loadAs<int64_t>(base, idx);
    case ncclUint64: return loadAs<uint64_t>(base, idx);
    case ncclFloat32: return loadAs<float>(base, idx);
    case ncclFloat64: return loadAs<double>(base, idx);
    case ncclFloat16: case ncclBfloat16: {
      uint16_t b;
      std::memcpy(&b, static_cast<const char*>(base) + idx * 2, 2);
      return decodeMini(b, miniFormat(dt));
    }
    default: return decodeMini(static_cast<const uint8_t*>(base)[idx], miniFormat(dt));
  }
}

const char* opName(TestOp op) {
  switch (op) {
    case TestOp::kSum: return "sum";
    case TestOp::kProd: return "prod";
    case TestOp::kMax: return "max";
    case TestOp::kMin: return "min";
    case TestOp::kAvg: return "avg";
    case TestOp::kPreMulSum: return "premulsum";
  }
  return "?";
}

bool redCaseExact(const RedCase& c) {
  return !(c.op == TestOp::kAvg && dtypeFloat(c.dt) && !isPow2(c.nranks));
}

std::vector<RedCase> standardReductions(int nranks) {
  return {{ncclInt32, TestOp::kSum, nranks},
          {ncclInt32, TestOp::kAvg, nranks},
          {ncclFloat32, TestOp::kMax, nranks},
          {ncclBfloat16, TestOp::kSum, nranks},
          {ncclFloat16, TestOp::kPreMulSum, nranks}};
}

double redInput(const RedCase& c, int rank, size_t i) {
  switch (c.op) {
    case TestOp::kSum: return boundedSumInput(c, 1, rank, i);
    case TestOp::kPreMulSum: return boundedSumInput(c, 2, rank, i);
    case TestOp::kMax:
    case TestOp::kMin: {
      uint64_t h = uint64_t(i) * 5 + uint64_t(rank) * 3;
      return dtypeSigned(c.dt) ? double(int(h % 7) - 3) : double(h % 7);
    }
    case TestOp::kProd: {
      // Element i is the product of t twos (t = i mod (kmax+1)), one per rank
      // with (i + rank) mod n < t; for signed types rank 0 may flip the sign.
      int64_t kmax = std::min<int64_t>({c.nranks, ilog2(dtypeExactLimit(c.dt)), 6});
      size_t t = i % size_t(kmax + 1);
      double v = ((i + size_t(rank)) % size_t(c.nranks)) < t ? 2.0 : 1.0;
      if (dtypeSigned(c.dt) && rank == 0 && i % 3 == 1) v = -v;
      return v;
    }
    case TestOp::kAvg: {
      // One rank adds n, every rank adds c(i): the sum is n*(c(i)+1).
      int n = c.nranks;
      double base = (2 * n <= dtypeExactLimit(c.dt) && i % 3 == 0) ? 1.0 : 0.0;
      return base + ((i % size_t(n)) == size_t(rank) ? double(n) : 0.0);
    }
  }
  return 0;
}

double redExpected(const RedCase& c, size_t i) {
  double acc = redInput(c, 0, i);
  for (int r = 1; r < c.nranks; ++r) {
    double v = redInput(c, r, i);
    switch (c.op) {
      case TestOp::kSum: case TestOp::kAvg: case TestOp::kPreMulSum: acc += v; break;
      case TestOp::kProd: acc *= v; break;
      case TestOp::kMax: acc = std::max(acc, v); break;
      case TestOp::kMin: acc = std::min(acc, v); break;
    }
  }
  if (c.op == TestOp::kAvg) acc /= c.nranks;
  if (c.op == TestOp::kPreMulSum) acc *= kPreMulScalar;
  return acc;
}

ncclResult_t acquireOp(TestOp op, ncclDataType_t dt, ncclComm_t comm, ncclRedOp_t* out) {
  switch (op) {
    case TestOp::kSum: *out = ncclSum; return ncclSuccess;
    case TestOp::kProd: *out = ncclProd; return ncclSuccess;
    case TestOp::kMax: *out = ncclMax; return ncclSuccess;
    case TestOp::kMin: *out = ncclMin; return ncclSuccess;
    case TestOp::kAvg: *out = ncclAvg; return ncclSuccess;
    case TestOp::kPreMulSum: {
      alignas(8) unsigned char scalar[8];
      encodeValue(dt, kPreMulScalar, scalar, 0);
      return ncclRedOpCreatePreMulSum(out, scalar, dt, ncclScalarHostImmediate, comm);
    }
  }
  return ncclInvalidArgument;
}

ncclResult_t releaseOp(TestOp op, ncclRedOp_t nop, ncclComm_t comm) {
  return op == TestOp::kPreMulSum ? ncclRedOpDestroy(nop, comm) : ncclSuccess;
}

double moveValue(ncclDataType_t dt, int srcRank, size_t i) {
  int64_t m = std::min<int64_t>(dtypeExactLimit(dt), 100);
  uint64_t h = uint64_t(i) * 31 + uint64_t(srcRank) * 17 + 5;
  if (dtypeSigned(dt)) return double(int64_t(h % uint64_t(2 * m + 1)) - m);
  return double(h % uint64_t(m + 1));
}

double sentinelValue(ncclDataType_t dt) {
  double l = double(dtypeExactLimit(dt));
  return dtypeSigned(dt) ? -l : l;
}

namespace {
BufferSource* gSource = nullptr;
bool gDevice = false;
}  // namespace

void setBufferSource(BufferSource* s) { gSource = s; }

void setDeviceBuffers(bool on) { gDevice = on; }
bool deviceBuffers() { return gDevice; }

HostBuf::HostBuf(ncclDataType_t dt, size_t count) : dt_(dt), count_(count) {
  // malloc(0) may return NULL; keep a real pointer so count-0 calls get one.
  bytes_ = count * dtypeSize(dt) + 16;
  if (gDevice) {
    p_ = std::calloc(1, bytes_);
    if (!p_ || ferryDeviceAlloc(&dev_, bytes_) != ncclSuccess) std::abort();
    hostNewer_ = true;
    return;
  }
  p_ = gSource ? gSource->alloc(bytes_) : std::malloc(bytes_);
  if (!p_) std::abort();
}

void* HostBuf::at(size_t i) {
  if (!dev_) return static_cast<char*>(p_) + i * dtypeSize(dt_);
  if (hostNewer_ && ferryDeviceMemcpyAsync(dev_, p_, bytes_, nullptr) != ncclSuccess) std::abort();
  hostNewer_ = false;
  deviceNewer_ = true;
  return static_cast<char*>(dev_) + i * dtypeSize(dt_);
}

void HostBuf::download() const {
  if (ferryDeviceMemcpyAsync(p_, dev_, bytes_, nullptr) != ncclSuccess ||
      ferryDeviceStreamSynchronize(nullptr) != ncclSuccess)
    std::abort();
  deviceNewer_ = false;
}

void HostBuf::set(size_t i, double v) {
  if (deviceNewer_) download();
  encodeValue(dt_, v, p_, i);
  if (dev_) hostNewer_ = true;
}

double HostBuf::get(size_t i) const {
  if (deviceNewer_) download();
  return decodeValue(dt_, p_, i);
}

HostBuf::~HostBuf() {
  if (dev_) {
    // Work still queued on the stream may write the buffer: let it finish.
    (void)ferryDeviceStreamSynchronize(nullptr);
    (void)ferryDeviceFree(dev_);
    std::free(p_);
    return;
  }
  if (gSource) {
    gSource->release(p_);
  } else {
    std::free(p_);
  }
}

void HostBuf::fill(double v) {
  for (size_t i = 0; i < count_; ++i) set(i, v);
}

void HostBuf::fill(const std::function<double(size_t)>& f) {
  for (size_t i = 0; i < count_; ++i) set(i, f(i));
}

bool checkBuf(const HostBuf& buf, size_t off, size_t n, const std::function<double(size_t)>& expect,
              const std::string& what) {
  size_t bad = 0;
  for (size_t k = 0; k < n; ++k) {
    double got = buf.get(off + k);
    double want = expect(k);
    if (got == want) continue;
    if (bad < 4)
      harnessMessage("%s: element %zu: got %g, expected %g", what.c_str(), k, got, want);
    ++bad;
  }
  if (bad > 4) harnessMessage("%s: %zu of %zu elements wrong", what.c_str(), bad, n);
  return bad == 0;
}

ncclResult_t initComm(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank) {
  *comm = nullptr;
  return ncclCommInitRank(comm, nranks, id, rank);
}

ncclResult_t closeComm(ncclComm_t comm) {
  ncclResult_t a = ncclCommFinalize(comm);
  ncclResult_t b = ncclCommDestroy(comm);
  return a != ncclSuccess ? a : b;
}

std::string resultName(ncclResult_t r) {
  static const char* names[] = {"ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError",
                                "ncclInternalError",   "ncclInvalidArgument",    "ncclInvalidUsage",
                                "ncclRemoteError",     "ncclInProgress"};
  int i = static_cast<int>(r);
  if (i >= 0 && i < 8) return names[i];
  return "ncclResult_t(" + std::to_string(i) + ")";
}

namespace {

// The integer a shell command prints, or -1.
int shellInt(const std::string& cmd) {
  int v = -1;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  if (fscanf(p, "%d", &v) != 1) v = -1;
  pclose(p);
  return v;
}

}  // namespace

int logFilesWith(const std::string& dir, const std::string& tag, const std::string& text) {
  return shellInt("grep -l -F -- '" + text + "' " + dir + "/" + tag + ".* 2>/dev/null | wc -l");
}

int maxLinesWith(const std::string& dir, const std::string& tag, const std::string& text) {
  return shellInt("grep -c -F -- '" + text + "' " + dir + "/" + tag + ".* 2>/dev/null | cut -d: -f2 | sort -n | tail -1");
}

namespace {

int removeEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

// The log directories of this test binary: removed when it exits with every
// test passed (kept for reading after a failure, or with
// FERRY_KEEP_TEST_LOGS=1). Only the process that made them removes them: a
// forked rank that exits normally must not.
struct LogDirs {
  std::map<std::string, std::string> dirs;
  pid_t owner = getpid();
  ~LogDirs() {
    if (getpid() != owner || std::getenv("FERRY_KEEP_TEST_LOGS")) return;
    if (!::testing::UnitTest::GetInstance()->Passed()) return;
    for (auto& [name, dir] : dirs)
      if (dir != "/tmp") nftw(dir.c_str(), removeEntry, 8, FTW_DEPTH | FTW_PHYS);
  }
};

}  // namespace

const std::string& testLogDir(const std::string& name) {
  static LogDirs logs;
  auto it = logs.dirs.find(name);
  if (it == logs.dirs.end()) {
    std::string tmpl = "/tmp/ferry-" + name + "-XXXXXX";
    const char* made = mkdtemp(tmpl.data());
    it = logs.dirs.emplace(name, made ? made : "/tmp").first;
  }
  return it->second;
}

RunOptions loggedOptions(const std::string& dir, const std::string& tag, const std::string& subsys, Env env,
                         int timeoutSec) {
  RunOptions o;
  o.timeoutSec = timeoutSec;
  o.env["FERRY_TIMEOUT_MS"] = "20000";
  o.env["NCCL_DEBUG"] = "INFO";
  o.env["NCCL_DEBUG_SUBSYS"] = subsys;
  o.env["NCCL_DEBUG_FILE"] = dir + "/" + tag + ".%p";
  for (auto& [k, v] : env) o.env[k] = v;
  return o;
}

void onSimulatedNodes(RunOptions* o, const std::string& tag, int nranks, const std::function<int(int)>& hostOf) {
  o->rankEnv.resize(nranks);
  for (int r = 0; r < nranks; ++r) o->rankEnv[r]["NCCL_HOSTID"] = tag + "-node-" + std::to_string(hostOf(r));
}

RunOptions killAtReadyOptions(int victim, int killDelayMs, int64_t ferryTimeoutMs, int timeoutSec) {
  RunOptions o;
  o.timeoutSec = timeoutSec;
  o.killRank = victim;
  o.killOnReady = true;
  o.killDelayMs = killDelayMs;
  o.env["FERRY_TIMEOUT_MS"] = std::to_string(ferryTimeoutMs);
  return o;
}

RunOptions pairedNodesOptions(const std::string& dir, const std::string& tag, Env env, int nranks,
                              int timeoutSec) {
  env.emplace("FERRY_NET_SLOT_BYTES", "65536");
  RunOptions o = loggedOptions(dir, tag, "INIT,NET", std::move(env), timeoutSec);
  onSimulatedNodes(&o, tag, nranks, [](int r) { return r / 2; });
  return o;
}

}  // namespace ferry::mp
