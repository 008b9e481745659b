// Schedule: what one rank does for one collective, as data-independent steps.
//
// Algorithms (ring, direct, ...) turn a CollArgs into a Schedule; the executor
// (src/exec/) runs it over Connections. A schedule names peers and byte ranges
// of the user's input/output buffers, never pointers, so it can be built and
// tested without a network or memory, and the same schedule could run on host
// or device memory.
//
// A Schedule is a set of Lanes that progress concurrently; the Steps of a lane
// run in order. Within one Schedule a (peer, direction) pair is used by at most
// one lane, so pieces on a connection never interleave between lanes. A step
// is split by the executor into pieces and pipelined through the connection's
// FIFO, so a long step still overlaps with the neighbours' work.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/comm_view.h"

namespace ferry {

enum class CollKind : uint8_t {
  kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll, kGather, kScatter,
  kSendRecv,  // a batch of point-to-point operations from one group
  kAllToAllv,  // ferryAlltoAllv (src/comm/alltoallv_call.h), never costed as such
};
const char* collName(CollKind k);

// Buffers are numbered: a collective has its input (0) and output (1); a
// point-to-point batch has one buffer per operation, in batch order.
constexpr uint32_t kInputBuf = 0;
constexpr uint32_t kOutputBuf = 1;
constexpr uint32_t kScratchBuf = 2;  // Schedule::scratchBytes of executor-owned memory

struct Region {
  uint32_t buf = kInputBuf;
  size_t offset = 0;  // bytes from the start of that buffer
  // -1: this rank's buffer; r: rank r's buffer, read or written directly
  // (symmetric windows: exec/peer_memory.h). Only copies and local
  // reductions take peer regions.
  int peer = -1;
};

enum class StepKind : uint8_t {
  kCopy,                // dst = src (scaled / divided per flags)
  kSend,                // send src to sendPeer
  kRecv,                // dst = recv from recvPeer
  kRecvReduceSend,      // send (recv OP src)
  kRecvReduceCopy,      // dst = recv OP src
  kRecvReduceCopySend,  // dst = recv OP src; send dst
  kRecvCopySend,        // dst = recv; send it on
  kLocalReduce,         // dst = src OP dst (no communication)
  kBarrier,             // wait until every rank has reached this step (peer memory)
};
const char* stepName(StepKind k);

struct Step {
  StepKind kind = StepKind::kCopy;
  int sendPeer = -1;
  int recvPeer = -1;
  Region src;
  Region dst;
  size_t bytes = 0;
  bool scaleSrc = false;    // PreMulSum: this rank's own input enters here, multiply it
  bool finalValue = false;  // this step produces final values: apply Avg's division
  // Copy what this step sends into the FIFO instead of publishing a
  // reference for the receiver to pull (cross-memory attach, ~half memcpy
  // speed here): when the receiver reduces it, or when many senders feed one
  // receiver (Gather), so that each sender copies its part in parallel
  // instead of the receiver pulling everything itself.
  bool sendByValue = false;
  // By reference only where the receiver maps the memory (ncclMemAlloc'd
  // buffers), by value at any size otherwise: a one-to-many move (Broadcast)
  // keeps both cores copying by value, where cross-memory attach leaves
  // the sender idle while the receiver copies at about half memcpy speed.
  bool mappedRefOnly = false;
  // kSend only: dst = src as well (a Broadcast root's own output), piece
  // by piece right after each piece is sent, while the peer reads it.
  bool alsoCopy = false;
};

struct Lane {
  std::vector<Step> steps;
};

struct Schedule {
  std::string algorithm;    // "ring", "direct", ...
  std::vector<Lane> lanes;
  // Local steps (copies) that run before any lane starts, e.g. saving an
  // in-place input to scratch before lanes overwrite it.
  std::vector<Step> prologue;
  size_t scratchBytes = 0;
};

// One point-to-point operation of a group (for CollKind::kSendRecv).
struct P2pOp {
  bool isSend = false;
  int peer = -1;
  size_t bytes = 0;         // buffer index = position of the op in the batch
};

struct CollArgs {
  CollKind kind = CollKind::kAllReduce;
  int rank = 0;
  int nranks = 1;
  int root = 0;
  size_t count = 0;         // NCCL's count argument (per rank block for gather-like ops)
  size_t elemSize = 1;
  bool inPlace = false;     // input and output are the same memory as NCCL defines it
  // The call's buffers lie in symmetric windows that every rank maps
  // (src/mem/window.h), so schedules may load and store peers' buffers.
  bool symmetric = false;
  // Symmetric schedules run as a device's stream work (comm/device_direct.h):
  // reduce in pieces of this many bytes instead of the host's L1-sized
  // ones (each step becomes a stream task or a kernel launch). 0: the host's.
  size_t streamPieceBytes = 0;
};

inline Step makeStep(StepKind kind, int sendPeer, int recvPeer, Region src, Region dst,
                     size_t bytes) {
  Step s;
  s.kind = kind;
  s.sendPeer = sendPeer;
  s.recvPeer = recvPeer;
  s.src = src;
  s.dst = dst;
  s.bytes = bytes;
  return s;
}

// The plain steps most builders use.
inline Step sendStep(int peer, Region src, size_t bytes) {
  return makeStep(StepKind::kSend, peer, -1, src, {}, bytes);
}
inline Step recvStep(int peer, Region dst, size_t bytes) {
  return makeStep(StepKind::kRecv, -1, peer, {}, dst, bytes);
}
inline Step copyStep(Region src, Region dst, size_t bytes) {
  return makeStep(StepKind::kCopy, -1, -1, src, dst, bytes);
}

// The schedule of a group's point-to-point batch (direct.cc); collective
// builders are listed in builders.h.
Schedule p2pSchedule(int rank, const std::vector<P2pOp>& ops);

// Rounds that move at most chunkBytes per step (see CommView::chunkBytes):
// body(base, len) in elements for each round; a round spans
// `chunksPerRound` chunks (a ring AllReduce: n; pairwise exchanges: 1).
template <typename Body>
void forEachRound(size_t count, size_t elem, int chunksPerRound, size_t chunkBytes, Body body) {
  size_t chunkElems = chunkBytes ? std::max<size_t>(1, chunkBytes / elem) : count;
  size_t roundElems = chunkElems * chunksPerRound;
  for (size_t base = 0; base < count; base += roundElems) body(base, std::min(roundElems, count - base));
}

// The single-rank case of every reducing collective: out = in (scaled, divided).
inline Lane singleCopy(size_t bytes) {
  Step s = makeStep(StepKind::kCopy, -1, -1, Region{kInputBuf, 0}, Region{kOutputBuf, 0}, bytes);
  s.scaleSrc = true;
  s.finalValue = true;
  return Lane{{s}};
}

// Byte offset of block c when `total` elements are split evenly into n blocks
// (blocks differ by at most one element; every rank computes the same split).
inline size_t blockStart(size_t total, int n, int c, size_t elemSize) {
  return static_cast<size_t>((static_cast<unsigned __int128>(total) * c) / n) * elemSize;
}

}  // namespace ferry
