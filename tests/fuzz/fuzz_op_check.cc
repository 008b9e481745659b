// Fuzz target: the operation descriptor a receiver checks (src/exec/op_check).
// Input: 32 bytes of this rank's expected descriptor (any values: describeOp
// must print whatever a peer sends), then the bytes that arrived from the peer.
#include "exec/op_check.h"

#include "tests/fuzz/fuzz_util.h"

using namespace ferry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Bytes in(data, size);
  OpDescriptor expected = in.take<OpDescriptor>();
  expected.magic = kOpDescriptorMagic;
  (void)describeOp(expected);
  Status st = checkDescriptor(in.data(), in.size(), expected, 3, 5);
  if (st.isOk()) {
    // Only the expected operation itself passes.
    OpDescriptor got;
    FUZZ_CHECK(in.size() >= sizeof(got));
    std::memcpy(&got, in.data(), sizeof(got));
    FUZZ_CHECK(std::memcmp(&got, &expected, sizeof(got)) == 0);
  } else {
    FUZZ_CHECK(st.code() == Code::kInvalidUsage && !st.message().empty());
  }
  if (in.size() >= sizeof(OpDescriptor)) {
    OpDescriptor got;
    std::memcpy(&got, in.data(), sizeof(got));
    (void)describeOp(got);
  }
  // What this rank's own encoder writes always passes.
  OpInfo info;
  info.kind = static_cast<CollKind>(expected.kind % (static_cast<int>(CollKind::kSendRecv) + 1));
  info.count = expected.count;
  info.root = expected.root;
  info.dtype = expected.dtype;
  info.op = expected.op;
  info.collSeq = expected.collSeq;
  OpDescriptor mine = makeDescriptor(info, expected.pairSeq, expected.bytes);
  FUZZ_CHECK(checkDescriptor(&mine, sizeof(mine), mine, 0, 1).isOk());
  return 0;
}
