// Exact multi-process test of the ferryAlltoAllv extension: N forked ranks,
// uneven counts (zeros included, self included), displacements with gaps
// that must stay untouched, a call inside a user group, and the argument
// checks (ncclInvalidArgument with a message naming the argument).
// With NODES > 1 the ranks sit on that many simulated hosts (NCCL_HOSTID),
// so the call runs rail-local (src/comm/alltoallv_call.h) unless NCCL_ALGO
// says AlltoAll:direct, and a local pair whose counts disagree fails the
// call on every rank (the receiver names the pair; the communicator is
// then failed, so this comes last).
// Usage: ferry_alltoallv_api_test NRANKS [NODES]; exit 0 only when every check holds.
#include <ferry/ferry.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/perf_tools/sim_comm.h"

namespace {

constexpr int32_t kGap = -7;  // receive-buffer filler that no rank sends

// Elements rank `from` sends to rank `to`: irregular, with some zeros.
size_t countOf(int from, int to) { return static_cast<size_t>((from * 5 + to * 3) % 7) * 3; }
int32_t valueOf(int from, int to, size_t i) {
  return from * 1000000 + to * 10000 + static_cast<int32_t>(i);
}

struct Plan {
  std::vector<size_t> sc, sd, rc, rd;
  size_t sendLen = 0, recvLen = 0;
};

// Displacements leave a 2-element gap before every block, so a write past
// a block or to a wrong displacement shows up.
Plan plan(int rank, int n) {
  Plan p;
  for (int q = 0; q < n; ++q) {
    p.sc.push_back(countOf(rank, q));
    p.sd.push_back(p.sendLen + 2);
    p.sendLen += countOf(rank, q) + 2;
    p.rc.push_back(countOf(q, rank));
    p.rd.push_back(p.recvLen + 2);
    p.recvLen += countOf(q, rank) + 2;
  }
  return p;
}

int failures = 0;
void expect(bool ok, int rank, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
  ++failures;
}

// One exchange (optionally inside a user group); checks every element.
void exchange(ncclComm_t comm, int rank, int n, bool inGroup) {
  Plan p = plan(rank, n);
  std::vector<int32_t> send(p.sendLen + 1, -1), recv(p.recvLen + 1, kGap);
  for (int q = 0; q < n; ++q) {
    for (size_t i = 0; i < p.sc[q]; ++i) send[p.sd[q] + i] = valueOf(rank, q, i);
  }
  if (inGroup) ncclGroupStart();
  ncclResult_t r = ferryAlltoAllv(send.data(), p.sc.data(), p.sd.data(), recv.data(), p.rc.data(),
                                  p.rd.data(), ncclInt32, comm, nullptr);
  if (inGroup) {
    ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess) r = e;
  }
  expect(r == ncclSuccess, rank, std::string("ferryAlltoAllv returned ") + ncclGetErrorString(r));
  size_t wrong = 0;
  std::vector<bool> inBlock(recv.size(), false);
  for (int q = 0; q < n; ++q) {
    for (size_t i = 0; i < p.rc[q]; ++i) {
      inBlock[p.rd[q] + i] = true;
      if (recv[p.rd[q] + i] != valueOf(q, rank, i)) ++wrong;
    }
  }
  for (size_t k = 0; k < recv.size(); ++k) {
    if (!inBlock[k] && recv[k] != kGap) ++wrong;
  }
  expect(wrong == 0, rank, std::to_string(wrong) + " wrong elements" + (inGroup ? " (in a group)" : ""));
}

void expectInvalid(ncclResult_t r, ncclComm_t comm, int rank, const char* what, const char* msg) {
  expect(r == ncclInvalidArgument, rank, std::string(what) + ": got " + ncclGetErrorString(r));
  const char* last = ncclGetLastError(comm);
  expect(last != nullptr && std::strstr(last, msg) != nullptr, rank,
         std::string(what) + ": last error '" + (last ? last : "") + "' lacks '" + msg + "'");
}

// Rank 0 sends rank 1 (same host) one element more than rank 1 expects:
// rank 1 refuses naming the pair, and no rank may succeed or hang.
void mismatch(ncclComm_t comm, int rank, int n) {
  Plan p = plan(rank, n);
  if (rank == 0) p.sc[1] += 1;
  std::vector<int32_t> send(p.sendLen + 2, 0), recv(p.recvLen + 1, kGap);
  ncclResult_t r = ferryAlltoAllv(send.data(), p.sc.data(), p.sd.data(), recv.data(), p.rc.data(),
                                  p.rd.data(), ncclInt32, comm, nullptr);
  expect(r != ncclSuccess, rank, "mismatched counts: the call succeeded");
  if (rank == 1) {
    std::string want = "rank 0 sends " + std::to_string(countOf(0, 1) + 1) + " elements to rank 1";
    expectInvalid(r, comm, rank, "mismatched counts", want.c_str());
  }
}

// Local argument checks: they fail before any communication, so every rank
// runs them on its own.
void badArguments(ncclComm_t comm, int rank, int n) {
  std::vector<size_t> ones(n, 1), zeros(n, 0), displs(n, 0);
  for (int q = 0; q < n; ++q) displs[q] = static_cast<size_t>(q);
  std::vector<int32_t> buf(4 * n, 0);
  expectInvalid(ferryAlltoAllv(buf.data(), nullptr, displs.data(), buf.data() + 2 * n, ones.data(),
                               displs.data(), ncclInt32, comm, nullptr),
                comm, rank, "NULL sendcounts", "sendcounts is NULL");
  expectInvalid(ferryAlltoAllv(buf.data(), ones.data(), displs.data(), buf.data() + 2 * n,
                               ones.data(), nullptr, ncclInt32, comm, nullptr),
                comm, rank, "NULL rdispls", "rdispls is NULL");
  expectInvalid(ferryAlltoAllv(nullptr, ones.data(), displs.data(), buf.data() + 2 * n,
                               ones.data(), displs.data(), ncclInt32, comm, nullptr),
                comm, rank, "NULL sendbuff", "sendbuff is NULL but sendcounts[0] is 1");
  expectInvalid(ferryAlltoAllv(buf.data(), ones.data(), displs.data(), nullptr, ones.data(),
                               displs.data(), ncclInt32, comm, nullptr),
                comm, rank, "NULL recvbuff", "recvbuff is NULL but recvcounts[0] is 1");
  expectInvalid(ferryAlltoAllv(buf.data(), ones.data(), displs.data(), buf.data(), ones.data(),
                               displs.data(), ncclInt32, comm, nullptr),
                comm, rank, "in place", "in-place AlltoAllv is not supported");
  // Partial overlap: the receive range starts inside the send range.
  expectInvalid(ferryAlltoAllv(buf.data(), ones.data(), displs.data(), buf.data() + n - 1,
                               ones.data(), displs.data(), ncclInt32, comm, nullptr),
                comm, rank, "overlap", "in-place AlltoAllv is not supported");
  expectInvalid(ferryAlltoAllv(buf.data(), ones.data(), displs.data(), buf.data() + 2 * n,
                               ones.data(), displs.data(), static_cast<ncclDataType_t>(99), comm,
                               nullptr),
                comm, rank, "bad datatype", "invalid datatype 99");
  // NULL buffers are fine when nothing moves: a collective no-op.
  expect(ferryAlltoAllv(nullptr, zeros.data(), displs.data(), nullptr, zeros.data(), displs.data(),
                        ncclInt32, comm, nullptr) == ncclSuccess,
         rank, "all-zero counts with NULL buffers");
}

int nodes = 1;

int rankBody(ferry::bench::RankContext& ctx) {
  const int rank = ctx.rank(), n = ctx.nranks();
  ncclComm_t comm = nullptr;
  if (int rc = ferry::bench::simulatedComm(ctx, "a2av", nodes, &comm); rc != 0) return rc;
  badArguments(comm, rank, n);
  exchange(comm, rank, n, false);
  exchange(comm, rank, n, true);
  exchange(comm, rank, n, false);  // the comm is still usable after the failed calls
  // Rail-local only (NCCL_ALGO=AlltoAll:direct is a group of Send/Recv,
  // where the Send/Recv check fails the receiver alone).
  const char* algo = std::getenv("NCCL_ALGO");
  bool direct = algo && std::strstr(algo, "direct");
  if (nodes > 1 && n / nodes >= 2 && !direct) {
    // The failure fails the communicator, which would also cut short a peer
    // still finishing the exchange above: every rank is past it first.
    if (!ctx.barrier()) return 1;
    mismatch(comm, rank, n);
  }
  ncclCommDestroy(comm);
  return failures == 0 ? 0 : 7;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 3;
  nodes = argc > 2 ? std::atoi(argv[2]) : 1;
  if (n < 1 || n > 16 || nodes < 1 || n % nodes != 0) {
    std::fprintf(stderr, "usage: %s NRANKS (1..16) [NODES dividing NRANKS]\n", argv[0]);
    return 255;
  }
  int rc = ferry::bench::forkLaunch(n, 60, rankBody);
  std::printf("ferryAlltoAllv over %d ranks on %d node(s): %s\n", n, nodes, rc == 0 ? "OK" : "FAILED");
  return rc;
}
