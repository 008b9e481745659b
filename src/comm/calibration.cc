#include "comm/calibration.h"

#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/log.h"
#include "kernels/reduce.h"

namespace ferry {
namespace {

// Used when the step latency could not be measured: the handoff through a
// shared-memory FIFO slot between two ranks that each have a core, as
// measured on Ferry's development machine.
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

// Runs `a` and `b` on two new threads, each pinned to its own allowed CPU
// when the process may use two: ranks that wait on each other mostly sit on
// different cores, and two unpinned threads sometimes share one (a handoff
// then costs a context switch, not a cache-line transfer, and the figure is
// ten times off either way). The caller's own affinity is left alone.
template <typename A, typename B>
void runOnTwoCpus(A a, B b) {
  cpu_set_t allowed;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  auto pinned = [&](int which, auto fn) {
    return std::thread([&cpus, which, fn]() mutable {
      if (cpus.size() == 2) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[which], &one);
        pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      }
      fn();
    });
  };
  std::thread ta = pinned(0, a), tb = pinned(1, b);
  ta.join();
  tb.join();
}

// Round trips of a flag on a shared word between two threads, spinning
// briefly and then yielding as Ferry's waits do. Half a round trip, best of
// five batches (the fastest is the one least disturbed by other work).
double flagPingPongUs() {
  std::atomic<int> flag{0};
  constexpr int kRounds = 400, kBatches = 5;
  auto waitFor = [&](int v) {
    for (int spin = 0; flag.load(std::memory_order_acquire) != v; ++spin)
      if (spin > 200) sched_yield();
  };
  double best = 1e30;
  runOnTwoCpus(
      [&] {
        for (int batch = 0, i = 0; batch < kBatches; ++batch) {
          double t0 = seconds();
          for (int k = 0; k < kRounds; ++k, ++i) {
            flag.store(2 * i + 1, std::memory_order_release);
            waitFor(2 * i + 2);
          }
          best = std::min(best, (seconds() - t0) * 1e6 / (2.0 * kRounds));
        }
      },
      [&] {
        for (int i = 0; i < kBatches * kRounds; ++i) {
          waitFor(2 * i + 1);
          flag.store(2 * i + 2, std::memory_order_release);
        }
      });
  return best;
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

HostCalibration measureCalibration() {
  HostCalibration cal;
  std::tie(cal.memcpyBytesPerUs, cal.reduceBytesPerUs) = copyAndReduce(4 << 20, 1);
  std::tie(cal.cachedMemcpyBytesPerUs, cal.cachedReduceBytesPerUs) = copyAndReduce(256 << 10, 16);
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  cal.cacheBytes = l2 > 0 ? double(l2) : double(1 << 20);
  cal.stepLatencyUs = flagPingPongUs();
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
      if (r.isOk()) {
        cal = r.take();
        // An older Ferry measured no step latency: measure all again.
        if (cal.stepLatencyUs <= 0) {
          FERRY_INFO(log::kTuning, "calibration file %s has no step latency: measuring again", path.c_str());
          cal = HostCalibration{};
        }
      } else if (access(path.c_str(), F_OK) == 0) {
        FERRY_WARN("ignoring calibration file: %s", r.status().message().c_str());
      }
    }
    if (cal.memcpyBytesPerUs <= 0) {
      cal = measureCalibration();
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
