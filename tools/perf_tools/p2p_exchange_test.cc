// Exact multi-process test of a Send/Recv group run as one rail exchange
// (FERRY_P2P_RAIL=1, src/comm/p2p_exchange.h): N forked ranks on NODES
// simulated hosts (NCCL_HOSTID). The group sends every rank (itself too)
// a block of its own datatype from its own allocation and receives likewise,
// with zero-sized blocks, guard elements that must stay untouched, and a
// group with a collective before it. Groups that are not a full exchange
// (a ring, two sends to one peer) still run as they are. Last, with the
// exchange on, one rank receives into one of its own send buffers (in
// place): the exchange reads a copy of the sends, so both directions are
// still exact.
// Usage: ferry_p2p_exchange_test NRANKS NODES; exit 0 only when every check holds.
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/perf_tools/sim_comm.h"

namespace {

constexpr int kGuard = 3;            // elements on each side of a block
constexpr unsigned char kFill = 0xA5;  // guard and receive filler

int failures = 0;
void expect(bool ok, int rank, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
  ++failures;
}

// Block from -> to: int32 for even destinations, uint8 for odd ones.
ncclDataType_t typeOf(int to) { return to % 2 ? ncclUint8 : ncclInt32; }
size_t eltOf(int to) { return to % 2 ? 1 : 4; }
size_t scale = 5;  // elements per unit of a block's size; the in-place round uses large blocks
size_t countOf(int from, int to) { return static_cast<size_t>((from * 7 + to * 5 + 3) % 6) * scale; }
unsigned char byteOf(int from, int to, size_t i) {
  return static_cast<unsigned char>(from * 31 + to * 17 + i * 13 + 1);
}

// One buffer per peer, guards around the block.
struct Block {
  std::vector<unsigned char> mem;
  size_t bytes = 0;
  unsigned char* data() { return mem.data() + kGuard * 4; }
};

Block sendBlock(int from, int to) {
  Block b;
  b.bytes = countOf(from, to) * eltOf(to);
  b.mem.assign(b.bytes + 8 * kGuard, kFill);
  for (size_t i = 0; i < b.bytes; ++i) b.data()[i] = byteOf(from, to, i);
  return b;
}

// The full exchange; `overlapOn` makes this rank's receive from the last
// rank land on its send buffer to the first rank of host 1 (both on other
// hosts: the block it sends there leaves late, through its rail peer).
int intoOf(int n, int nodes) { return n / nodes; }
ncclResult_t fullExchange(ncclComm_t comm, int rank, int n, int nodes, bool withColl, bool overlapOn) {
  const int from = n - 1, into = intoOf(n, nodes);
  std::vector<Block> send, recv;
  for (int q = 0; q < n; ++q) {
    send.push_back(sendBlock(rank, q));
    Block r;
    // The receive block holds what q sends this rank, typed by this rank.
    r.bytes = countOf(q, rank) * eltOf(rank);
    r.mem.assign(r.bytes + 8 * kGuard, kFill);
    recv.push_back(std::move(r));
  }
  int32_t one = rank + 1, sum = 0;
  ncclGroupStart();
  ncclResult_t r = ncclSuccess;
  if (withColl) r = ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, comm, nullptr);
  for (int q = 0; q < n && r == ncclSuccess; ++q) {
    r = ncclSend(send[q].data(), countOf(rank, q), typeOf(q), q, comm, nullptr);
    void* dst = overlapOn && q == from ? send[into].data() : recv[q].data();
    if (r == ncclSuccess) r = ncclRecv(dst, countOf(q, rank), typeOf(rank), q, comm, nullptr);
  }
  ncclResult_t e = ncclGroupEnd();
  if (r == ncclSuccess) r = e;
  if (r != ncclSuccess) return r;
  if (withColl) expect(sum == n * (n + 1) / 2, rank, "AllReduce in the group: " + std::to_string(sum));
  size_t wrong = 0;
  for (int q = 0; q < n; ++q) {
    if (overlapOn && q == from) {  // landed on a send buffer, whose tail stays as it was
      for (size_t k = 0; k < recv[q].bytes; ++k) wrong += send[into].data()[k] != byteOf(q, rank, k);
      continue;
    }
    Block& b = recv[q];
    for (size_t k = 0; k < b.mem.size(); ++k) {
      bool in = k >= kGuard * 4 && k < kGuard * 4 + b.bytes;
      unsigned char want = in ? byteOf(q, rank, k - kGuard * 4) : kFill;
      if (b.mem[k] != want) ++wrong;
    }
  }
  expect(wrong == 0, rank, std::to_string(wrong) + " wrong bytes" + (withColl ? " (after a collective)" : "") +
                               (overlapOn ? " (in place)" : ""));
  return r;
}

// Not an exchange: a ring, with two messages to the next rank.
void ring(ncclComm_t comm, int rank, int n) {
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  std::vector<int32_t> out = {rank, rank * 2}, in = {-1, -1};
  ncclGroupStart();
  ncclSend(&out[0], 1, ncclInt32, next, comm, nullptr);
  ncclSend(&out[1], 1, ncclInt32, next, comm, nullptr);
  ncclRecv(&in[0], 1, ncclInt32, prev, comm, nullptr);
  ncclRecv(&in[1], 1, ncclInt32, prev, comm, nullptr);
  ncclResult_t r = ncclGroupEnd();
  expect(r == ncclSuccess && in[0] == prev && in[1] == prev * 2, rank,
         "ring: got " + std::to_string(in[0]) + "," + std::to_string(in[1]));
}

int nodes = 1;

int rankBody(ferry::bench::RankContext& ctx) {
  const int rank = ctx.rank(), n = ctx.nranks();
  ncclComm_t comm = nullptr;
  if (int rc = ferry::bench::simulatedComm(ctx, "p2px", nodes, &comm); rc != 0) return rc;
  for (int round = 0; round < 3; ++round) {
    ncclResult_t r = fullExchange(comm, rank, n, nodes, round == 1, false);
    expect(r == ncclSuccess, rank, std::string("exchange returned ") + ncclGetErrorString(r));
  }
  ring(comm, rank, n);
  // Rank 1 receives into one of its own send buffers (fullExchange): only
  // the exchange promises that (a plain group may overwrite a send block
  // before it is sent, as in NCCL).
  const char* on = std::getenv("FERRY_P2P_RAIL");
  bool railShaped = nodes > 1 && n / nodes >= 2;
  if (on && std::strcmp(on, "1") == 0 && railShaped) {
    scale = 1 << 18;  // up to 5 MB blocks: more than the FIFOs hold, so the phases overlap
    ncclResult_t r = fullExchange(comm, rank, n, nodes, false, rank == 1);
    expect(r == ncclSuccess, rank, std::string("in-place exchange returned ") + ncclGetErrorString(r));
  }
  ncclCommDestroy(comm);
  return failures == 0 ? 0 : 7;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 4;
  nodes = argc > 2 ? std::atoi(argv[2]) : 2;
  if (n < 2 || n > 16 || nodes < 1 || n % nodes != 0) {
    std::fprintf(stderr, "usage: %s NRANKS (2..16) NODES (dividing NRANKS)\n", argv[0]);
    return 255;
  }
  int rc = ferry::bench::forkLaunch(n, 60, rankBody);
  std::printf("Send/Recv exchange over %d ranks on %d node(s): %s\n", n, nodes, rc == 0 ? "OK" : "FAILED");
  return rc;
}
