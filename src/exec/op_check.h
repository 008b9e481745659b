// Operation descriptors: catching ranks that disagree about an operation.
//
// NCCL trusts every rank to call the same collective with the same count,
// datatype, op and root; when they do not, it returns success with wrong
// data or hangs. Ferry checks instead. The first piece an operation sends on
// each connection starts with an OpDescriptor; the receiver compares it with
// what it expects (its own view of the same operation) before using a byte,
// and a difference fails the operation with ncclInvalidUsage and a message
// naming both sides. pairSeq counts the operations that used this direction
// of this pair, so a piece left over from an earlier, mismatched operation
// is never taken for data of the next one.
//
// Cost: 32 bytes in a piece that is sent anyway, one comparison per
// connection per operation. FERRY_CHECK_OPS=0 turns it off (for measuring).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "algorithms/schedule.h"
#include "core/status.h"

namespace ferry {

// What the caller asked for (the same on every rank of a collective).
struct OpInfo {
  CollKind kind = CollKind::kSendRecv;
  uint64_t count = 0;       // NCCL's count argument (0 for Send/Recv batches)
  int32_t root = -1;        // -1: no root
  uint8_t dtype = 0xff;     // kernels::DType, 0xff: none (Send/Recv)
  uint8_t op = 0xff;        // OpCode below
  uint64_t collSeq = 0;     // collectives issued on this comm so far, 1-based (0: Send/Recv)
  int self = -1;            // this rank (for messages; not compared)
};

// Reduction as the user named it.
enum OpCode : uint8_t { kOpSum = 0, kOpProd, kOpMax, kOpMin, kOpAvg, kOpPreMulSum, kOpNone = 0xff };

// 32 bytes, no padding (compared with memcmp): a 16-byte piece and its
// descriptor fit the 48 bytes a shared-memory record carries in its first
// line (transports/shm/segment.h, kNearPayload). With 40 bytes, a 2-rank
// 32 B AllGather or AlltoAll moved two lines per piece.
struct OpDescriptor {
  uint32_t pairSeq = 0;     // operations on this direction of this pair, 1-based
  uint32_t collSeq = 0;     // OpInfo::collSeq's low 32 bits
  uint64_t count = 0;
  uint64_t bytes = 0;       // bytes this operation carries on this direction
  int32_t root = -1;
  uint8_t kind = 0, dtype = 0, op = 0;
  uint8_t magic = 0;        // kOpDescriptorMagic: a descriptor, not left-over data
};
static_assert(sizeof(OpDescriptor) == 32, "the descriptor is part of the wire format");

constexpr uint8_t kOpDescriptorMagic = 0xD5;

OpDescriptor makeDescriptor(const OpInfo& info, uint32_t pairSeq, uint64_t bytes);

// Checks what arrived from `peer` (by value, at least `size` bytes at
// `data`) against what this rank expects; a mismatch is ncclInvalidUsage
// with both sides spelled out.
Status checkDescriptor(const void* data, size_t size, const OpDescriptor& expected, int self,
                       int peer);

// "AllReduce count 1048576 float32 sum", "Broadcast count 1000 float32 root 0"...
std::string describeOp(const OpDescriptor& d);

}  // namespace ferry
