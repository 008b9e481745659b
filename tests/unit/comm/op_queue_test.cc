// OpQueue: the progress thread of stream-ordered operations runs them in
// push order, drain waits for all of them, a stopped queue cancels what
// never started, and a queue holding too many bytes makes the next push
// wait for the oldest op.
#include "comm/op_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ferry {
namespace {

struct Log {
  std::mutex mu;
  std::vector<int> ran, cancelled;
};

class Op final : public QueuedOp {
 public:
  Op(Log* log, int id, std::atomic<bool>* gate = nullptr, size_t bytes = 0)
      : log_(log), id_(id), gate_(gate), bytes_(bytes) {}
  void run() override {
    while (gate_ && !gate_->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard<std::mutex> g(log_->mu);
    log_->ran.push_back(id_);
  }
  void cancel(const Status&) override {
    std::lock_guard<std::mutex> g(log_->mu);
    log_->cancelled.push_back(id_);
  }
  size_t heldBytes() const override { return bytes_; }

 private:
  Log* log_;
  int id_;
  std::atomic<bool>* gate_;
  size_t bytes_;
};

const std::atomic<bool> kNoAbort{false};

TEST(OpQueue, RunsInPushOrderAndDrains) {
  Log log;
  OpQueue q(0);
  EXPECT_FALSE(q.busy());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(q.push(std::make_shared<Op>(&log, i), 1 << 20, &kNoAbort, 10000).isOk());
  ASSERT_TRUE(q.drain(&kNoAbort, 10000).isOk());
  EXPECT_FALSE(q.busy());
  std::vector<int> want(50);
  for (int i = 0; i < 50; ++i) want[i] = i;
  EXPECT_EQ(log.ran, want);
  EXPECT_EQ(q.completed(), 50u);
}

TEST(OpQueue, DrainTimesOutOnAStuckOpAndAbortEndsIt) {
  Log log;
  std::atomic<bool> gate{false}, abort{false};
  OpQueue q(0);
  ASSERT_TRUE(q.push(std::make_shared<Op>(&log, 1, &gate), 1 << 20, &kNoAbort, 10000).isOk());
  EXPECT_TRUE(q.busy());
  Status st = q.drain(&kNoAbort, 50);
  EXPECT_EQ(st.code(), Code::kTimeout) << st.message();
  abort = true;
  EXPECT_FALSE(q.drain(&abort, 10000).isOk());
  gate = true;
  EXPECT_TRUE(q.drain(&kNoAbort, 10000).isOk());
}

TEST(OpQueue, DestroyCancelsWhatNeverStarted) {
  Log log;
  std::atomic<bool> gate{false};
  {
    OpQueue q(0);
    ASSERT_TRUE(q.push(std::make_shared<Op>(&log, 1, &gate), 1 << 20, &kNoAbort, 10000).isOk());
    for (int i = 2; i <= 4; ++i) ASSERT_TRUE(q.push(std::make_shared<Op>(&log, i), 1 << 20, &kNoAbort, 10000).isOk());
    std::thread open([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      gate = true;
    });
    q.cancelPending(invalidUsage("stop"));
    open.join();
  }
  // Op 1 ran if it had started before the cancel, else it was cancelled
  // too; each op exactly once, and 2-4 never ran.
  EXPECT_EQ(log.cancelled.size() + log.ran.size(), 4u);
  EXPECT_GE(log.cancelled.size(), 3u);
  for (int id : log.ran) EXPECT_EQ(id, 1);
}

TEST(OpQueue, HeldBytesBoundMakesPushWait) {
  Log log;
  std::atomic<bool> gate{false};
  OpQueue q(0);
  ASSERT_TRUE(q.push(std::make_shared<Op>(&log, 1, &gate, 100), 150, &kNoAbort, 10000).isOk());
  // Op 2 queues behind the blocked op 1: 100 held, the bound is 150.
  ASSERT_TRUE(q.push(std::make_shared<Op>(&log, 2, nullptr, 100), 150, &kNoAbort, 10000).isOk());
  // A third would hold 200 > 150 while op 2 waits: the push waits (and here
  // times out, op 1 never finishing) rather than queueing without end.
  Status st = q.push(std::make_shared<Op>(&log, 3, nullptr, 100), 150, &kNoAbort, 50);
  EXPECT_EQ(st.code(), Code::kTimeout) << st.message();
  gate = true;
  ASSERT_TRUE(q.push(std::make_shared<Op>(&log, 3, nullptr, 100), 150, &kNoAbort, 10000).isOk());
  ASSERT_TRUE(q.drain(&kNoAbort, 10000).isOk());
  EXPECT_EQ(log.ran, (std::vector<int>{1, 2, 3}));
}

}  // namespace
}  // namespace ferry
