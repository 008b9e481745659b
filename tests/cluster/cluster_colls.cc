// One rank of the cluster collective test, launched by ferry-cluster (one
// process per rank, hosts in separate network namespaces). Every collective
// runs on host buffers for several sizes (up to > 4 MiB) and is checked
// exactly, as tests/mp does: inputs are small integers whose reductions are
// exact in the type, receive buffers are pre-filled with a sentinel no input
// produces and carry guard elements past the end. Prints one OK/FAIL line per
// case and exits non-zero on any mismatch or error; an alarm() watchdog turns
// a hang into a failure.
//
// Local rank 0 of each host also prints `MIN_RX host=H bytes=B`: payload bytes
// that host must have received from other hosts, whatever the algorithm, for
// the cases it ran (see minRx*); the ctest driver compares B with the veth
// counters.
//
// FERRY_CLUSTER_LOOP_MS=T switches to fault mode: AllReduce of 4 MiB (and,
// with FERRY_CLUSTER_LOOP_ALLTOALL=1, an AlltoAll of 4 MiB) in a loop,
// checked, for T ms (a host gets killed meanwhile; survivors must fail).
// Each rank prints `LOOP running` after its first iteration: the launcher
// counts the kill delay from there (--kill-trigger), not from launch, so a
// slow start on a loaded machine cannot put the kill inside communicator
// creation.
#include <ferry/device.h>
#include <nccl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/cluster/cluster_cases.h"

namespace ferry::cluster {
namespace {

int envInt(const char* name, int dflt) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

void onAlarm(int) {
  static const char msg[] = "FAIL watchdog: rank still running at its deadline (hang)\n";
  ssize_t n = write(STDOUT_FILENO, msg, sizeof(msg) - 1);
  (void)n;
  _exit(3);
}

// Fault mode: AllReduce until loopMs have passed; the first error ends it.
// Ranks agree on when to stop (max-reduced flag each iteration): a rank that
// left one iteration early would fail its peers' last AllReduce.
int runLoop(const Ctx& cx, int loopMs) {
  auto t0 = std::chrono::steady_clock::now();
  auto elapsedMs = [&] {
    return (long long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
        .count();
  };
  const size_t count = size_t(1) << 20;  // 4 MiB of floats
  const bool withAlltoAll = envInt("FERRY_CLUSTER_LOOP_ALLTOALL", 0) != 0;
  int iters = 0;
  for (;;) {
    bool ok = caseAllReduce(cx, count, Red::kSum, false, /*quiet=*/true);
    if (ok && withAlltoAll) ok = caseAlltoAll(cx, count / size_t(cx.nranks), /*quiet=*/true);
    int32_t stop = elapsedMs() >= loopMs ? 1 : 0;
    ncclResult_t r = ok ? ncclAllReduce(&stop, &stop, 1, ncclInt32, ncclMax, cx.comm, nullptr) : ncclSuccess;
    if (!ok || r != ncclSuccess) {
      printf("FAIL loop: iteration %d failed, %lld ms into the loop%s%s\n", iters, elapsedMs(),
             ok ? ": stop-flag AllReduce returned " : "", ok ? ncclGetErrorString(r) : "");
      return 1;
    }
    if (++iters == 1) printf("LOOP running: first AllReduce done\n");  // ferry-cluster --kill-trigger
    if (stop) break;
  }
  printf("OK loop: %d %s iterations\n", iters, withAlltoAll ? "AllReduce+AlltoAll" : "AllReduce");
  return 0;
}

int runAll(const Ctx& cx, const std::vector<size_t>& counts) {
  int fails = 0, cases = 0;
  long long minRx = 0;
  for (size_t c : counts) {
    for (auto& r : runSize(cx, c)) {
      ++cases;
      fails += r.ok ? 0 : 1;
      minRx += r.minRxThisHost;
    }
  }
  if (cx.local == 0) printf("MIN_RX host=%d bytes=%lld\n", cx.host, minRx);
  printf("%s rank %d: %d of %d cases OK\n", fails ? "FAIL" : "OK", cx.rank, cases - fails, cases);
  return fails ? 1 : 0;
}

// FERRY_CLUSTER_ALGOS=a,b,...: after the default run, every collective again
// on a communicator split off with NCCL_ALGO=<name> forced, one name at a
// time (Comm creation reads NCCL_ALGO; ncclResetDebugInit drops the cached
// configuration). An algorithm that cannot run a collective falls back, so
// each collective runs with every algorithm that supports it. rail and
// direct also force AlltoAll's choice ("AlltoAll:" clause).
// ncclResetDebugInit is deprecated in nccl.h (not NCCL's supported API) but
// exported by NCCL and Ferry alike; here it is the way to re-read NCCL_ALGO.
void reloadConfig() {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  ncclResetDebugInit();
#pragma GCC diagnostic pop
}

int runForced(const Ctx& cx, const std::string& list, const std::vector<size_t>& counts) {
  int rc = 0;
  size_t start = 0;
  while (start < list.size()) {
    size_t end = list.find(',', start);
    std::string algo = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? list.size() : end + 1;
    if (algo.empty()) continue;
    // AlltoAll's own clause too (Ferry's extension), so that AlltoAll and
    // ferryAlltoAllv run rail or direct as forced.
    std::string value = algo == "rail" || algo == "direct" ? algo + ";AlltoAll:" + algo : algo;
    setenv("NCCL_ALGO", value.c_str(), 1);
    reloadConfig();
    Ctx sub = cx;
    ncclResult_t r = ncclCommSplit(cx.comm, 0, cx.rank, &sub.comm, nullptr);
    if (r != ncclSuccess) {
      printf("FAIL split for NCCL_ALGO=%s: %s (%s)\n", algo.c_str(), ncclGetErrorString(r),
             ncclGetLastError(nullptr));
      return 1;
    }
    printf("ALGO %s\n", algo.c_str());
    rc |= runAll(sub, counts);
    ncclCommDestroy(sub.comm);
    if (rc) break;
  }
  unsetenv("NCCL_ALGO");
  reloadConfig();
  return rc;
}

// Whether host h is in the comma list (null: no).
bool listed(const char* list, int h) {
  if (!list) return false;
  std::string l = std::string(",") + list + ",";
  return l.find("," + std::to_string(h) + ",") != std::string::npos;
}

}  // namespace
}  // namespace ferry::cluster

int main() {
  using namespace ferry::cluster;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Ctx cx;
  cx.rank = envInt("FERRY_CLUSTER_RANK", -1);
  cx.nranks = envInt("FERRY_CLUSTER_NRANKS", -1);
  cx.perHost = envInt("FERRY_CLUSTER_RANKS_PER_HOST", 1);
  if (cx.rank < 0 || cx.nranks < 1 || cx.rank >= cx.nranks || cx.perHost < 1 || cx.nranks % cx.perHost) {
    fprintf(stderr, "FAIL cluster_colls: run me under ferry-cluster (FERRY_CLUSTER_RANK/NRANKS unset or bad)\n");
    return 2;
  }
  cx.host = cx.rank / cx.perHost;
  cx.local = cx.rank % cx.perHost;
  cx.hosts = cx.nranks / cx.perHost;
  signal(SIGALRM, onAlarm);
  alarm(envInt("FERRY_CLUSTER_WATCHDOG_S", 50));

  // FERRY_CLUSTER_DEVICE_HOSTS=h,...: those hosts' ranks keep every buffer
  // in test-device memory (before the first library call reads FERRY_DEVICE).
  const bool device = listed(getenv("FERRY_CLUSTER_DEVICE_HOSTS"), cx.host);
  if (device) {
    setenv("FERRY_DEVICE", "testdev", 1);
    setDeviceMode(true);
  }

  // Under NCCL_COMM_ID every rank derives the same id; rank 0 hosts the root there.
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r == ncclSuccess) r = ncclCommInitRank(&cx.comm, cx.nranks, id, cx.rank);
  if (r != ncclSuccess) {
    printf("FAIL init: %s (%s)\n", ncclGetErrorString(r), ncclGetLastError(nullptr));
    return 1;
  }
  int loopMs = envInt("FERRY_CLUSTER_LOOP_MS", 0);
  int rc = loopMs > 0 ? runLoop(cx, loopMs) : runAll(cx, {1, 1031, 262147, 1310723});
  const char* algos = getenv("FERRY_CLUSTER_ALGOS");
  if (rc == 0 && loopMs == 0 && algos && *algos) rc = runForced(cx, algos, {1, 1031, 262147});
  if (rc == 0 && device) {
    // The bridge must have carried the device buffers.
    unsigned long long staged = 0;
    ferryCommStagedBytes(cx.comm, &staged);
    printf("MEM rank=%d kind=testdev staged=%llu\n", cx.rank, staged);
    if (staged == 0) {
      printf("FAIL rank %d: device buffers but nothing staged\n", cx.rank);
      rc = 1;
    }
  } else if (rc == 0) {
    printf("MEM rank=%d kind=host\n", cx.rank);
  }
  if (rc != 0) {
    ncclCommAbort(cx.comm);
    return rc;
  }
  ncclResult_t a = ncclCommFinalize(cx.comm);
  ncclResult_t b = ncclCommDestroy(cx.comm);
  if (a != ncclSuccess || b != ncclSuccess) {
    printf("FAIL teardown: finalize %s, destroy %s\n", ncclGetErrorString(a), ncclGetErrorString(b));
    return 1;
  }
  return 0;
}
