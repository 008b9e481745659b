// Every rank must end an AllReduce / ReduceScatter+AllGather with the same
// bits, also where the result is not exact: low-precision types with a
// PreMulSum scalar that rounds (1.1), and sums whose rounding depends on the
// order. Each rank gathers every rank's output and compares bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

int agreeBody(int rank, int n, const ncclUniqueId& id, ncclDataType_t dt, size_t count,
              bool premul) {
  ncclComm_t comm = nullptr;
  MP_NCCL(initComm(&comm, n, id, rank));
  size_t e = dtypeSize(dt);
  std::vector<unsigned char> in(count * e), out(count * e), all(count * e * n);
  // Inputs whose scaled sum rounds differently in different orders.
  for (size_t i = 0; i < count * e; ++i) in[i] = static_cast<unsigned char>((rank * 37 + i * 11) & 0x3b);
  ncclRedOp_t op = ncclSum;
  if (premul) {
    float scalar = 1.1f;
    MP_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  }
  if (premul && dt != ncclFloat32) {  // the scalar must have the op's type
    MP_NCCL(ncclRedOpDestroy(op, comm));
    unsigned char scalar[8] = {};
    // Near 1.1 and exact in the type: 1 + 113/1024 (half), 1 + 13/128 (bf16), 1 + 1/8 (fp8).
    double v = dt == ncclFloat16 ? 1.1103515625 : dt == ncclBfloat16 ? 1.1015625 : 1.125;
    encodeValue(dt, v, scalar, 0);
    MP_NCCL(ncclRedOpCreatePreMulSum(&op, scalar, dt, ncclScalarHostImmediate, comm));
  }
  MP_NCCL(ncclAllReduce(in.data(), out.data(), count, dt, op, comm, nullptr));
  MP_NCCL(ncclAllGather(out.data(), all.data(), count * e, ncclUint8, comm, nullptr));
  for (int q = 0; q < n; ++q) {
    const unsigned char* theirs = all.data() + q * count * e;
    for (size_t i = 0; i < count * e; ++i)
      if (theirs[i] != out[i]) {
        size_t el = i / e;
        unsigned v1 = 0, v2 = 0, x = 0;
        std::memcpy(&v1, theirs + el * e, e);
        std::memcpy(&v2, out.data() + el * e, e);
        std::memcpy(&x, in.data() + el * e, e);
        harnessMessage("element %zu: rank %d has %#x, rank %d has %#x (my input %#x)\n", el, q, v1,
                       rank, v2, x);
        break;
      }
    MP_CHECK(std::memcmp(theirs, out.data(), count * e) == 0,
             "rank %d's AllReduce result differs from rank %d's (%s, count %zu%s)", q, rank,
             dtypeName(dt), count, premul ? ", PreMulSum" : "");
  }
  if (premul) MP_NCCL(ncclRedOpDestroy(op, comm));
  MP_NCCL(closeComm(comm));
  return 0;
}

void runAgree(int n, ncclDataType_t dt, size_t count, bool premul) {
  RunOptions o;
  o.timeoutSec = 90;
  o.env["FERRY_TIMEOUT_MS"] = "20000";
  EXPECT_RANKS_OK(runRanks(
      n, [&](int r, int nr, const ncclUniqueId& id) { return agreeBody(r, nr, id, dt, count, premul); },
      o));
}

class MpAgree : public ::testing::TestWithParam<ncclDataType_t> {};

TEST_P(MpAgree, SmallPreMulSum) { runAgree(3, GetParam(), 100, true); }
TEST_P(MpAgree, LargePreMulSum) { runAgree(3, GetParam(), 300001, true); }
TEST_P(MpAgree, TwoRanksLargePreMulSum) { runAgree(2, GetParam(), 300001, true); }
TEST_P(MpAgree, SmallSum) { runAgree(4, GetParam(), 1000, false); }
TEST_P(MpAgree, LargeSum) { runAgree(4, GetParam(), 300001, false); }

INSTANTIATE_TEST_SUITE_P(LowPrecision, MpAgree,
                         ::testing::Values(ncclFloat16, ncclBfloat16, ncclFloat8e4m3, ncclFloat32));

}  // namespace
}  // namespace ferry::mp
