// Status and Result: an ok Status is a bare null pointer; errors keep their
// code and message through copies, moves and the propagation macros.
#include "core/status.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace ferry {
namespace {

TEST(Status, OkIsOnePointerWithNoMessage) {
  // The small-message path passes dozens of ok Statuses per call; one
  // pointer, not a code plus a std::string (perf/README.md, instr_per_op).
  static_assert(sizeof(Status) == sizeof(void*));
  Status s;
  EXPECT_TRUE(s.isOk());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_TRUE(Status::ok().isOk());
  // A message without an error is dropped: ok is ok.
  Status okWithText(Code::kOk, "ignored");
  EXPECT_TRUE(okWithText.isOk());
  EXPECT_EQ(okWithText.message(), "");
}

TEST(Status, ErrorKeepsCodeAndMessage) {
  Status s = remoteError("rank 3 exited");
  EXPECT_FALSE(s.isOk());
  EXPECT_FALSE(static_cast<bool>(s));
  EXPECT_EQ(s.code(), Code::kRemote);
  EXPECT_EQ(s.message(), "rank 3 exited");
  EXPECT_EQ(inProgress().code(), Code::kInProgress);
}

TEST(Status, CopiesAreIndependent) {
  Status copy;
  {
    Status original = invalidArgument("count too large");
    copy = original;
    Status second(original);
    EXPECT_EQ(second.message(), "count too large");
    EXPECT_EQ(original.message(), "count too large");
  }  // the original is gone; the copy owns its own record
  EXPECT_EQ(copy.code(), Code::kInvalidArgument);
  EXPECT_EQ(copy.message(), "count too large");
  copy = Status::ok();
  EXPECT_TRUE(copy.isOk());
}

TEST(Status, MovesLeaveTheSourceOk) {
  Status a = systemError("poll failed");
  Status b(std::move(a));
  EXPECT_TRUE(a.isOk());  // NOLINT(bugprone-use-after-move): defined as ok
  EXPECT_EQ(b.message(), "poll failed");
  Status c = timeoutError("no progress");
  c = std::move(b);
  EXPECT_EQ(c.code(), Code::kSystem);
  EXPECT_TRUE(b.isOk());  // NOLINT(bugprone-use-after-move)
}

TEST(Status, SelfAssignmentKeepsTheError) {
  Status s = internalError("bug");
  Status& alias = s;
  s = alias;
  EXPECT_EQ(s.message(), "bug");
  s = std::move(alias);
  EXPECT_EQ(s.message(), "bug");
}

Result<int> half(int v) {
  if (v % 2 != 0) return invalidArgument("odd: " + std::to_string(v));
  return v / 2;
}

Status quarter(int v, int* out) {
  FERRY_ASSIGN(int h, half(v));
  FERRY_ASSIGN(int q, half(h));
  *out = q;
  return Status::ok();
}

Status both(int a, int b, int* out) {
  FERRY_TRY(quarter(a, out));
  FERRY_TRY(quarter(b, out));
  return Status::ok();
}

TEST(Status, ResultAndMacrosPropagateTheFirstError) {
  Result<int> r = half(8);
  ASSERT_TRUE(r.isOk());
  EXPECT_TRUE(r.status().isOk());
  EXPECT_EQ(r.value(), 4);
  int out = 0;
  EXPECT_TRUE(both(8, 12, &out).isOk());
  EXPECT_EQ(out, 3);
  Status st = both(8, 6, &out);  // 6 / 2 = 3 is odd
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "odd: 3");
  EXPECT_EQ(half(5).status().message(), "odd: 5");
}

}  // namespace
}  // namespace ferry
