#include "comm/calibration.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/log.h"
#include "kernels/reduce.h"

namespace ferry {
namespace {

// Used when nothing measured the step latency (a process cannot ping-pong
// itself): the handoff through a shared-memory FIFO slot between two ranks
// that each have a core, as measured on Ferry's development machine.
constexpr double kDefaultStepLatencyUs = 2.0;

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best of three: the fastest run is the one least disturbed by other work.
template <typename Fn>
double bestBytesPerUs(size_t bytes, Fn fn) {
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    double t0 = seconds();
    fn();
    double us = (seconds() - t0) * 1e6;
    if (us > 0) best = std::max(best, bytes / us);
  }
  return best;
}

// Round trips of a flag between two processes on a shared page, spinning
// briefly and then yielding as Ferry's waits do. Half a round trip.
double pingPongUs() {
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return 0;
  auto* flag = new (page) std::atomic<int>(0);
  constexpr int kRounds = 2000;
  auto waitFor = [&](int v) {
    for (int spin = 0; flag->load(std::memory_order_acquire) != v; ++spin)
      if (spin > 200) sched_yield();
  };
  pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < kRounds; ++i) {
      waitFor(2 * i + 1);
      flag->store(2 * i + 2, std::memory_order_release);
    }
    _exit(0);
  }
  double us = 0;
  if (child > 0) {
    double t0 = seconds();
    for (int i = 0; i < kRounds; ++i) {
      flag->store(2 * i + 1, std::memory_order_release);
      waitFor(2 * i + 2);
    }
    us = (seconds() - t0) * 1e6 / (2.0 * kRounds);
    waitpid(child, nullptr, 0);
  }
  munmap(page, 4096);
  return us;
}

std::string hostName() {
  char h[256] = {};
  gethostname(h, sizeof(h) - 1);
  return h;
}

}  // namespace

// memcpy and float-sum speed on `bytes`; `reps` passes per timing so small
// sizes are timed over more than a microsecond.
std::pair<double, double> copyAndReduce(size_t bytes, int reps) {
  std::vector<float> a(bytes / 4, 1.0f), b(bytes / 4, 2.0f), c(bytes / 4);
  double copy = bestBytesPerUs(bytes * reps, [&] {
    for (int i = 0; i < reps; ++i) memcpy(c.data(), a.data(), bytes);
  });
  double red = bestBytesPerUs(bytes * reps, [&] {
    for (int i = 0; i < reps; ++i)
      kernels::reduce(c.data(), a.data(), b.data(), a.size(), kernels::DType::kFloat32, kernels::Op::kSum);
  });
  return {copy, red};
}

HostCalibration measureCalibration(bool pingPong) {
  HostCalibration cal;
  std::tie(cal.memcpyBytesPerUs, cal.reduceBytesPerUs) = copyAndReduce(4 << 20, 1);
  std::tie(cal.cachedMemcpyBytesPerUs, cal.cachedReduceBytesPerUs) = copyAndReduce(256 << 10, 16);
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  cal.cacheBytes = l2 > 0 ? double(l2) : double(1 << 20);
  cal.stepLatencyUs = pingPong ? pingPongUs() : 0;
  cal.source = "measured";
  return cal;
}

std::string calibrationPath() {
  std::string p = config::getString(config::Param::kCalibrationFile);
  if (p == "none") return "";
  if (!p.empty()) return p;
  const char* xdg = getenv("XDG_CACHE_HOME");
  const char* home = getenv("HOME");
  std::string dir = xdg && *xdg ? std::string(xdg) : home && *home ? std::string(home) + "/.cache" : "";
  if (dir.empty()) return "";
  return dir + "/ferry/calibration-" + hostName() + ".txt";
}

Status writeCalibration(const std::string& path, const HostCalibration& c) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos) {
    std::string dir = path.substr(0, slash);
    std::string parent = dir.substr(0, dir.rfind('/'));
    mkdir(parent.c_str(), 0755);  // ~/.cache may not exist yet
    mkdir(dir.c_str(), 0755);
  }
  // Written aside and renamed: a reader never sees half a file.
  std::string tmp = path + "." + std::to_string(getpid());
  {
    std::ofstream f(tmp);
    f << "# Ferry intra-host calibration (ferry-topo --calibrate rewrites it)\n"
      << "memcpy_mbs " << c.memcpyBytesPerUs << "\nreduce_mbs " << c.reduceBytesPerUs
      << "\nstep_latency_us " << c.stepLatencyUs << "\ncached_memcpy_mbs " << c.cachedMemcpyBytesPerUs
      << "\ncached_reduce_mbs " << c.cachedReduceBytesPerUs << "\ncache_bytes " << c.cacheBytes << "\n";
    if (!f) return systemError("cannot write calibration file " + tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return systemError("cannot rename calibration file to " + path);
  }
  return Status::ok();
}

Result<HostCalibration> readCalibration(const std::string& path) {
  std::ifstream f(path);
  if (!f) return systemError("cannot open " + path);
  HostCalibration c;
  std::string key;
  double value = 0;
  while (f >> key) {
    if (key[0] == '#') {
      std::getline(f, key);
      continue;
    }
    if (!(f >> value) || value < 0) return invalidArgument(path + ": bad value for " + key);
    if (key == "memcpy_mbs") c.memcpyBytesPerUs = value;
    else if (key == "reduce_mbs") c.reduceBytesPerUs = value;
    else if (key == "step_latency_us") c.stepLatencyUs = value;
    else if (key == "cached_memcpy_mbs") c.cachedMemcpyBytesPerUs = value;
    else if (key == "cached_reduce_mbs") c.cachedReduceBytesPerUs = value;
    else if (key == "cache_bytes") c.cacheBytes = value;
  }
  if (c.memcpyBytesPerUs <= 0 || c.reduceBytesPerUs <= 0 || c.cachedMemcpyBytesPerUs <= 0 ||
      c.cachedReduceBytesPerUs <= 0 || c.cacheBytes <= 0)
    return invalidArgument(path + ": memcpy_mbs, reduce_mbs, cached_memcpy_mbs, cached_reduce_mbs "
                           "and cache_bytes must be positive (rewrite it: ferry-topo --calibrate)");
  c.source = "file " + path;
  return c;
}

const HostCalibration& hostCalibration() {
  static HostCalibration cal;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string path = calibrationPath();
    if (!path.empty()) {
      Result<HostCalibration> r = readCalibration(path);
      if (r.isOk()) cal = r.take();
      else if (access(path.c_str(), F_OK) == 0)
        FERRY_WARN("ignoring calibration file: %s", r.status().message().c_str());
    }
    if (cal.memcpyBytesPerUs <= 0) {
      cal = measureCalibration(false);
      if (!path.empty()) {
        Status st = writeCalibration(path, cal);
        if (!st.isOk()) FERRY_INFO(log::kTuning, "calibration not cached: %s", st.message().c_str());
      }
    }
    if (cal.stepLatencyUs <= 0) cal.stepLatencyUs = kDefaultStepLatencyUs;
  });
  return cal;
}

}  // namespace ferry
