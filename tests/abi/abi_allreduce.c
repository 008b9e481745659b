/* Drop-in test: an ordinary NCCL application, compiled against NVIDIA's
 * nccl.h and linked against NVIDIA's libnccl.so.2, run with Ferry's
 * libnccl.so.2 first on LD_LIBRARY_PATH.
 *
 * Usage: abi_allreduce [expected-library-dir]
 * Forks 4 ranks that exchange the ncclUniqueId through a shared mapping and
 * run AllReduce (float and int32 sums), Broadcast and AllGather on host
 * buffers with the NULL stream, checking every element exactly. With an
 * argument, it also checks that libnccl was loaded from that directory and
 * is Ferry (it exports ferryVersionString). No CUDA function is called.
 * Exit 0 only if every rank succeeded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kRanks = 4, kTimeoutSec = 60 };

/* Shared by all processes; created before fork. */
struct Shared {
  int idReady; /* set by rank 0 (release) once id is valid; -1 if it failed */
  ncclUniqueId id;
};

static const char* gExpectedDir;

#define CHECK_NCCL(rank, call)                                                          \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    if (r_ != ncclSuccess) {                                                            \
      fprintf(stderr, "rank %d: %s failed: %d (%s)\n", rank, #call, (int)r_,           \
              ncclGetErrorString(r_));                                                  \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Which file provides ncclAllReduce, and is it Ferry? */
static int checkLibrary(int rank) {
  int version = 0;
  CHECK_NCCL(rank, ncclGetVersion(&version));
  if (version != NCCL_VERSION_CODE) {
    fprintf(stderr, "rank %d: ncclGetVersion gave %d, expected %d\n", rank, version,
            NCCL_VERSION_CODE);
    return 1;
  }
  if (gExpectedDir == NULL) return 0;
  /* Look the symbol up the way the dynamic linker bound it. */
  void* fn = dlsym(RTLD_DEFAULT, "ncclAllReduce");
  Dl_info info;
  if (fn == NULL || dladdr(fn, &info) == 0 || info.dli_fname == NULL) {
    fprintf(stderr, "rank %d: dladdr(ncclAllReduce) failed\n", rank);
    return 1;
  }
  char libPath[PATH_MAX], dirPath[PATH_MAX];
  if (realpath(info.dli_fname, libPath) == NULL || realpath(gExpectedDir, dirPath) == NULL) {
    fprintf(stderr, "rank %d: realpath(%s or %s): %s\n", rank, info.dli_fname, gExpectedDir,
            strerror(errno));
    return 1;
  }
  size_t n = strlen(dirPath);
  if (strncmp(libPath, dirPath, n) != 0 || libPath[n] != '/') {
    fprintf(stderr, "rank %d: ncclAllReduce comes from %s, not from %s\n", rank, libPath,
            dirPath);
    return 1;
  }
  const char* (*versionString)(void) =
      (const char* (*)(void))dlsym(RTLD_DEFAULT, "ferryVersionString");
  if (versionString == NULL) {
    fprintf(stderr, "rank %d: %s does not export ferryVersionString: not Ferry\n", rank,
            libPath);
    return 1;
  }
  if (rank == 0) printf("loaded %s: %s\n", libPath, versionString());
  return 0;
}

static int fail(int rank, const char* what, size_t i, double got, double want) {
  fprintf(stderr, "rank %d: %s: element %zu is %.17g, expected %.17g\n", rank, what, i, got,
          want);
  return 1;
}

/* Values are small integers, so float sums are exact in any order. */
static int allReduceFloat(ncclComm_t comm, int rank, size_t count) {
  float* send = malloc(count * sizeof(float));
  float* recv = malloc(count * sizeof(float));
  if (!send || !recv) return fail(rank, "malloc", 0, 0, 0);
  for (size_t i = 0; i < count; i++) send[i] = (float)((rank + 1) * (int)(i % 7 + 1));
  memset(recv, 0xff, count * sizeof(float));
  CHECK_NCCL(rank, ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, NULL));
  int bad = 0;
  for (size_t i = 0; i < count && !bad; i++) {
    float want = (float)(10 * (int)(i % 7 + 1)); /* (1+2+3+4) * (i%7+1) */
    if (recv[i] != want) bad = fail(rank, "AllReduce float32 sum", i, recv[i], want);
  }
  /* In place: sum of rank+1 again. */
  for (size_t i = 0; i < count; i++) send[i] = (float)(rank + 1);
  CHECK_NCCL(rank, ncclAllReduce(send, send, count, ncclFloat, ncclSum, comm, NULL));
  for (size_t i = 0; i < count && !bad; i++)
    if (send[i] != 10.0f) bad = fail(rank, "in-place AllReduce float sum", i, send[i], 10);
  free(send);
  free(recv);
  return bad;
}

static int allReduceInt(ncclComm_t comm, int rank, size_t count) {
  int32_t* send = malloc(count * sizeof(int32_t));
  int32_t* recv = malloc(count * sizeof(int32_t));
  if (!send || !recv) return fail(rank, "malloc", 0, 0, 0);
  for (size_t i = 0; i < count; i++) send[i] = (rank + 1) * 1000 + (int32_t)(i % 13);
  memset(recv, 0, count * sizeof(int32_t));
  CHECK_NCCL(rank, ncclAllReduce(send, recv, count, ncclInt32, ncclSum, comm, NULL));
  int bad = 0;
  for (size_t i = 0; i < count && !bad; i++) {
    int32_t want = 10000 + 4 * (int32_t)(i % 13);
    if (recv[i] != want) bad = fail(rank, "AllReduce int32 sum", i, recv[i], want);
  }
  free(send);
  free(recv);
  return bad;
}

static int broadcast(ncclComm_t comm, int rank, size_t count, int root) {
  int32_t* send = malloc(count * sizeof(int32_t));
  int32_t* recv = malloc(count * sizeof(int32_t));
  if (!send || !recv) return fail(rank, "malloc", 0, 0, 0);
  /* Non-roots fill send with junk that must not arrive anywhere. */
  for (size_t i = 0; i < count; i++) send[i] = rank == root ? (int32_t)(3 * i + 7) : -rank;
  memset(recv, 0, count * sizeof(int32_t));
  CHECK_NCCL(rank, ncclBroadcast(send, recv, count, ncclInt32, root, comm, NULL));
  int bad = 0;
  for (size_t i = 0; i < count && !bad; i++)
    if (recv[i] != (int32_t)(3 * i + 7)) bad = fail(rank, "Broadcast", i, recv[i], 3 * i + 7);
  free(send);
  free(recv);
  return bad;
}

static int allGather(ncclComm_t comm, int rank, size_t count) {
  float* send = malloc(count * sizeof(float));
  float* recv = malloc(kRanks * count * sizeof(float));
  if (!send || !recv) return fail(rank, "malloc", 0, 0, 0);
  for (size_t i = 0; i < count; i++) send[i] = (float)(rank * 100000 + (int)i);
  memset(recv, 0xff, kRanks * count * sizeof(float));
  CHECK_NCCL(rank, ncclAllGather(send, recv, count, ncclFloat32, comm, NULL));
  int bad = 0;
  for (size_t i = 0; i < kRanks * count && !bad; i++) {
    float want = (float)((int)(i / count) * 100000 + (int)(i % count));
    if (recv[i] != want) bad = fail(rank, "AllGather float32", i, recv[i], want);
  }
  free(send);
  free(recv);
  return bad;
}

static int waitForId(struct Shared* sh, int rank) {
  double deadline = nowSec() + kTimeoutSec;
  for (;;) {
    int state = __atomic_load_n(&sh->idReady, __ATOMIC_ACQUIRE);
    if (state == 1) return 0;
    if (state < 0 || nowSec() > deadline) {
      fprintf(stderr, "rank %d: no unique id from rank 0\n", rank);
      return 1;
    }
    usleep(1000);
  }
}

static int runRank(struct Shared* sh, int rank) {
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&sh->id);
    __atomic_store_n(&sh->idReady, r == ncclSuccess ? 1 : -1, __ATOMIC_RELEASE);
    CHECK_NCCL(rank, r);
  } else if (waitForId(sh, rank) != 0) {
    return 1;
  }
  if (checkLibrary(rank) != 0) return 1;

  ncclComm_t comm = NULL;
  CHECK_NCCL(rank, ncclCommInitRank(&comm, kRanks, sh->id, rank));
  int n = 0, me = -1;
  CHECK_NCCL(rank, ncclCommCount(comm, &n));
  CHECK_NCCL(rank, ncclCommUserRank(comm, &me));
  if (n != kRanks || me != rank) {
    fprintf(stderr, "rank %d: comm reports %d ranks, rank %d\n", rank, n, me);
    return 1;
  }
  /* 1 element, an odd size that does not split evenly, and a large one. */
  const size_t counts[] = {1, 1031, 262147};
  int bad = 0;
  for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]) && !bad; k++) {
    bad = allReduceFloat(comm, rank, counts[k]) || allReduceInt(comm, rank, counts[k]) ||
          broadcast(comm, rank, counts[k], 2) || allGather(comm, rank, counts[k]);
  }
  CHECK_NCCL(rank, ncclCommDestroy(comm));
  return bad;
}

static void killAll(pid_t* pids) {
  for (int r = 0; r < kRanks; r++)
    if (pids[r] > 0) kill(pids[r], SIGKILL);
  while (wait(NULL) > 0) {
  }
}

/* Waits for all ranks; the first failure or the deadline kills the rest, so
 * a dead rank does not leave its peers blocked until the timeout. */
static int reap(pid_t* pids) {
  double deadline = nowSec() + kTimeoutSec;
  for (int left = kRanks; left > 0;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0) {
      perror("waitpid");
      killAll(pids);
      return 1;
    }
    if (pid == 0) {
      if (nowSec() > deadline) {
        fprintf(stderr, "timeout after %d s: killing the remaining ranks\n", kTimeoutSec);
        killAll(pids);
        return 1;
      }
      usleep(10000);
      continue;
    }
    left--;
    for (int r = 0; r < kRanks; r++) {
      if (pids[r] != pid) continue;
      pids[r] = 0;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "rank %d failed (%s %d); killing the others\n", r,
                WIFEXITED(status) ? "exit code" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        killAll(pids);
        return 1;
      }
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  gExpectedDir = argc > 1 ? argv[1] : NULL;
  setvbuf(stdout, NULL, _IONBF, 0);
  struct Shared* sh =
      mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  memset(sh, 0, sizeof(*sh));
  pid_t parent = getpid();
  pid_t pids[kRanks] = {0};
  for (int r = 0; r < kRanks; r++) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      for (int k = 0; k < r; k++) kill(pids[k], SIGKILL);
      return 1;
    }
    if (pid == 0) {
      /* Die with the parent, and on our own after the deadline. */
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      alarm(kTimeoutSec + 5);
      _exit(runRank(sh, r));
    }
    pids[r] = pid;
  }
  int failed = reap(pids);
  printf("%s\n", failed ? "FAILED" : "PASSED: 4 ranks, all results exact");
  return failed;
}
