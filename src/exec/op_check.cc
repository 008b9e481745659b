#include "exec/op_check.h"

#include <cstring>

#include "kernels/reduce.h"

namespace ferry {
namespace {

const char* opName(uint8_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return op < sizeof(kNames) / sizeof(kNames[0]) ? kNames[op] : nullptr;
}

const char* kindName(uint8_t k) {
  return k <= static_cast<uint8_t>(CollKind::kAllToAllv) ? collName(static_cast<CollKind>(k)) : "?";
}

bool sameOp(const OpDescriptor& a, const OpDescriptor& b) {
  return a.pairSeq == b.pairSeq && a.collSeq == b.collSeq && a.count == b.count &&
         a.bytes == b.bytes && a.kind == b.kind && a.dtype == b.dtype && a.op == b.op &&
         a.root == b.root;
}

}  // namespace

OpDescriptor makeDescriptor(const OpInfo& info, uint32_t pairSeq, uint64_t bytes) {
  OpDescriptor d;
  d.magic = kOpDescriptorMagic;
  d.pairSeq = pairSeq;
  d.collSeq = static_cast<uint32_t>(info.collSeq);
  d.count = info.count;
  d.bytes = bytes;
  d.kind = static_cast<uint8_t>(info.kind);
  d.dtype = info.dtype;
  d.op = info.op;
  d.root = info.root;
  return d;
}

std::string describeOp(const OpDescriptor& d) {
  std::string s = kindName(d.kind);
  if (d.kind == static_cast<uint8_t>(CollKind::kSendRecv)) {
    s += " of " + std::to_string(d.bytes) + " bytes";
  } else {
    s += " count " + std::to_string(d.count);
    if (d.dtype != 0xff) s += std::string(" ") + kernels::name(static_cast<kernels::DType>(d.dtype));
    if (const char* op = opName(d.op)) s += std::string(" ") + op;
    if (d.root >= 0) s += " root " + std::to_string(d.root);
  }
  return s;
}

Status checkDescriptor(const void* data, size_t size, const OpDescriptor& expected, int self,
                       int peer) {
  OpDescriptor got;
  if (size < sizeof(got))
    return invalidUsage("rank " + std::to_string(peer) + " sent " + std::to_string(size) +
                        " bytes where rank " + std::to_string(self) + " expected the start of " +
                        describeOp(expected) + ": the ranks are not running the same operation");
  std::memcpy(&got, data, sizeof(got));
  if (got.magic != kOpDescriptorMagic)
    return invalidUsage("rank " + std::to_string(peer) + " sent data without an operation "
                        "descriptor where rank " + std::to_string(self) + " expected the start of " +
                        describeOp(expected) + " (left over from an earlier mismatched operation?)");
  if (sameOp(got, expected)) return Status::ok();
  auto p2p = static_cast<uint8_t>(CollKind::kSendRecv);
  if (got.kind == p2p && expected.kind == p2p && got.pairSeq == expected.pairSeq)
    return invalidUsage("Send/Recv #" + std::to_string(got.pairSeq) + " from rank " +
                        std::to_string(peer) + " to rank " + std::to_string(self) + ": rank " +
                        std::to_string(peer) + " sends " + std::to_string(got.bytes) +
                        " bytes, rank " + std::to_string(self) + " receives " +
                        std::to_string(expected.bytes) + " bytes (ncclSend and ncclRecv sizes must match)");
  std::string seq = expected.collSeq ? "op #" + std::to_string(expected.collSeq)
                                     : "operation #" + std::to_string(expected.pairSeq) +
                                           " between ranks " + std::to_string(peer) + " and " +
                                           std::to_string(self);
  std::string theirs = describeOp(got);
  if (got.collSeq != expected.collSeq && got.collSeq && expected.collSeq)
    theirs += " (its op #" + std::to_string(got.collSeq) + ")";
  if (got.bytes != expected.bytes && got.kind == expected.kind && got.count == expected.count)
    theirs += " sending " + std::to_string(got.bytes) + " bytes, " + std::to_string(expected.bytes) +
              " expected";
  return invalidUsage(seq + ": rank " + std::to_string(self) + " " + describeOp(expected) +
                      ", rank " + std::to_string(peer) + " " + theirs +
                      ": every rank must call the same operations in the same order");
}

}  // namespace ferry
