// ferry_soak: long runs of random collectives, every result checked exactly,
// and chaos trials that kill a rank and go on without it (tests/soak/README.md).
//
//   ferry_soak soak  [--ranks N] [--ops K] [--seed S]   forked ranks on this host
//   ferry_soak rank  [--ops K] [--seed S]               one rank under ferry-cluster
//   ferry_soak chaos [--trials T] [--seed S]            forked 4 ranks per trial
//
// Soak: every rank reports its open descriptors and resident memory half way
// and at the end; growth beyond a small slack is a failure. Chaos:
// per trial a random rank is killed at a random moment inside a random op
// sequence; the survivors must fail (no hang), shrink it away with
// NCCL_SHRINK_ABORT and run 20 more random ops exactly; /dev/shm must hold
// no more Ferry segments after all trials than before.
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "tests/soak/soak_ops.h"

namespace ferry::soak {
namespace {

struct Args {
  std::string mode;
  int ranks = 4;
  uint64_t ops = 10000;
  uint64_t seed = 1;
  int trials = 100;
};

// Slack for descriptors and memory between the midpoint and the end:
// allocator caches and lazily made connections settle early; a leak per op
// would not.
constexpr int kFdSlack = 2;
constexpr long kRssSlackKiB = 16 * 1024;
enum Slot { kFd0, kFd1, kRss0, kRss1, kDone };

// Descriptors and memory are sampled half way and at the end: by then the
// largest sizes have been seen (allocator high-water marks), so any growth
// in the second half is per-op.
uint64_t midpoint(uint64_t ops) { return ops >= 200 ? ops / 2 : 100; }

int runSequence(const mp::Rank& me, uint64_t seed, uint64_t ops, bool measure) {
  for (uint64_t i = 0; i < ops; ++i) {
    if (measure && i == midpoint(ops)) {
      mp::harnessSetValue(kFd0, openFds());
      mp::harnessSetValue(kRss0, rssKiB());
    }
    Op op = makeOp(seed, i, me.nranks);
    if (runOp(me, op) != 0) {
      mp::harnessMessage("op %llu: %s", (unsigned long long)i, describe(op).c_str());
      fprintf(stderr, "rank %d: op %llu failed: %s\n", me.rank, (unsigned long long)i, describe(op).c_str());
      return 1;
    }
    mp::harnessSetValue(kDone, int64_t(i + 1));
  }
  if (measure) {
    mp::harnessSetValue(kFd1, openFds());
    mp::harnessSetValue(kRss1, rssKiB());
  }
  return 0;
}

int soak(const Args& a) {
  mp::RunOptions o;
  o.timeoutSec = 3600;
  o.env["FERRY_TIMEOUT_MS"] = "60000";
  mp::RunResult res = mp::runRanks(
      a.ranks,
      [&](int rank, int n, const ncclUniqueId& id) {
        return mp::withComm(rank, n, id, [&](const mp::Rank& me) { return runSequence(me, a.seed, a.ops, true); });
      },
      o);
  bool ok = res.ok();
  for (const mp::RankResult& r : res.ranks) {
    const int64_t* v = r.values;
    printf("rank %d: %lld ops, fds %lld -> %lld, rss %lld -> %lld KiB\n", r.rank, (long long)v[kDone],
           (long long)v[kFd0], (long long)v[kFd1], (long long)v[kRss0], (long long)v[kRss1]);
    if (a.ops > midpoint(a.ops) && (v[kFd1] - v[kFd0] > kFdSlack || v[kRss1] - v[kRss0] > kRssSlackKiB)) ok = false;
  }
  if (!res.ok()) printf("%s", res.summary().c_str());
  printf("soak %s: %d ranks, %llu ops, seed %llu\n", ok ? "PASSED" : "FAILED", a.ranks, (unsigned long long)a.ops,
         (unsigned long long)a.seed);
  return ok ? 0 : 1;
}

// One rank launched by ferry-cluster: rank and size from its environment,
// the id from NCCL_COMM_ID (ncclGetUniqueId on every rank reads it).
int clusterRank(const Args& a) {
  const char* r = getenv("FERRY_CLUSTER_RANK");
  const char* n = getenv("FERRY_CLUSTER_NRANKS");
  if (!r || !n) {
    fprintf(stderr, "ferry_soak rank: run under tests/cluster/ferry-cluster\n");
    return 2;
  }
  int rank = atoi(r), nranks = atoi(n);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 2;
  int rc = mp::withComm(rank, nranks, id, [&](const mp::Rank& me) {
    uint64_t half = midpoint(a.ops) < a.ops ? midpoint(a.ops) : a.ops;
    int st = runSequence(me, a.seed, half, false);
    int fd0 = openFds();
    long rss0 = rssKiB();
    if (st == 0) st = runSequence(me, a.seed + 1, a.ops - half, false);
    printf("rank %d: %s, second half: fds %d -> %d, rss %ld -> %ld KiB\n", rank, st ? "FAILED" : "ok", fd0,
           openFds(), rss0, rssKiB());
    return st;
  });
  return rc;
}

int ferryShmSegments() {
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (strncmp(e->d_name, "ferry", 5) == 0) ++n;
    closedir(d);
  }
  return n;
}

// A chaos trial's survivors: random ops until one fails, then shrink the
// victim away and run 20 more exactly.
int chaosBody(int rank, int n, const ncclUniqueId& id, uint64_t seed, int victim) {
  ncclComm_t comm = nullptr;
  MP_NCCL(mp::initComm(&comm, n, id, rank));
  mp::Rank me{comm, rank, n};
  uint64_t i = 0;
  int rc = 0;
  for (; rc == 0 && i < 100000; ++i) {
    if (rank == victim && i == 2) mp::harnessSignalReady();
    rc = runOp(me, makeOp(seed, i, n));
  }
  MP_CHECK(rank != victim, "the victim saw a failure at op %llu", (unsigned long long)i);
  MP_CHECK(rc != 0, "no failure in 100000 ops");
  int exclude[] = {victim};
  ncclComm_t child = nullptr;
  MP_NCCL(ncclCommShrink(comm, exclude, 1, &child, nullptr, NCCL_SHRINK_ABORT));
  mp::Rank after{child, rank < victim ? rank : rank - 1, n - 1};
  for (uint64_t k = 0; k < 20; ++k) {
    Op op = makeOp(seed ^ 0x5eed, k, n - 1);
    MP_CHECK(runOp(after, op) == 0, "after the shrink, op %llu: %s", (unsigned long long)k, describe(op).c_str());
  }
  MP_NCCL(mp::closeComm(child));
  MP_NCCL(ncclCommDestroy(comm));
  return 0;
}

int chaos(const Args& a) {
  int shm0 = ferryShmSegments(), failed = 0;
  std::mt19937_64 g(a.seed);
  for (int t = 0; t < a.trials; ++t) {
    uint64_t seed = g();
    int victim = static_cast<int>(g() % 4);
    mp::RunOptions o = mp::killAtReadyOptions(victim, static_cast<int>(g() % 300), 15000, 120);
    if (t % 2 == 1) mp::onSimulatedNodes(&o, "chaos" + std::to_string(t), 4, [](int r) { return r / 2; });
    mp::RunResult res = mp::runRanks(
        4, [&](int rank, int n, const ncclUniqueId& id) { return chaosBody(rank, n, id, seed, victim); }, o);
    bool ok = res.ok() && res.ranks[victim].killedByHarness;
    printf("trial %d: victim %d after %d ms, %s: %s\n", t, victim, o.killDelayMs,
           t % 2 ? "2 simulated hosts" : "one host", ok ? "ok" : "FAILED");
    if (!ok) printf("%s", res.summary().c_str()), ++failed;
    fflush(stdout);
  }
  int shm1 = ferryShmSegments();
  printf("chaos %s: %d of %d trials failed; /dev/shm ferry segments %d -> %d\n",
         failed == 0 && shm1 <= shm0 ? "PASSED" : "FAILED", failed, a.trials, shm0, shm1);
  return failed == 0 && shm1 <= shm0 ? 0 : 1;
}

int usage() {
  fprintf(stderr, "usage: ferry_soak soak|rank|chaos [--ranks N] [--ops K] [--seed S] [--trials T]\n");
  return 2;
}

}  // namespace
}  // namespace ferry::soak

int main(int argc, char** argv) {
  using namespace ferry::soak;
  if (argc < 2) return usage();
  Args a;
  a.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    long long v = atoll(argv[i + 1]);
    if (k == "--ranks") a.ranks = static_cast<int>(v);
    else if (k == "--ops") a.ops = static_cast<uint64_t>(v);
    else if (k == "--seed") a.seed = static_cast<uint64_t>(v);
    else if (k == "--trials") a.trials = static_cast<int>(v);
    else return usage();
  }
  if (a.mode == "soak") return soak(a);
  if (a.mode == "rank") return clusterRank(a);
  if (a.mode == "chaos") return chaos(a);
  return usage();
}
