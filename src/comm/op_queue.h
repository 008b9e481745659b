// OpQueue: a communicator's operations that wait for a stream, run in call
// order by one progress thread (issue 14, docs/accelerators.md).
//
// NCCL orders a communicator's operations by call order. A host-memory
// collective runs inside its call; one on device memory can only run once
// its stream reaches it, so it is queued here and the call returns. While
// anything is queued, a host-memory call drains the queue before it runs
// (Comm::quiesce), so it cannot overtake work called before it, and only
// the progress thread touches the communicator's connections and plans.
//
// The thread starts with the first push. Destroying the queue cancels what
// never started (each op releases whoever waits on it) and joins the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/status.h"

namespace ferry {

class QueuedOp {
 public:
  virtual ~QueuedOp() = default;
  // On the queue's thread, in push order.
  virtual void run() = 0;
  // Instead of run(), when the queue stops first: release every waiter.
  virtual void cancel(const Status& why) = 0;
  // Host bytes the op holds while queued (back-pressure).
  virtual size_t heldBytes() const { return 0; }
};

class OpQueue {
 public:
  // rank: for the thread's log lines.
  explicit OpQueue(int rank) : rank_(rank) {}
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // Queues op. While the queued ops and op would hold more than
  // maxHeldBytes (and one is queued), waits for the oldest to start: a program
  // that enqueues faster than its streams run does not stage without end.
  Status push(std::shared_ptr<QueuedOp> op, size_t maxHeldBytes, const std::atomic<bool>* abort,
              int64_t timeoutMs);
  // Whether an op is queued or running (one load: every host call asks).
  bool busy() const { return pending_.load(std::memory_order_acquire) != 0; }
  // Until nothing is queued or running; kTimeout if an op makes no
  // progress for timeoutMs, kAborted-like error if *abort.
  Status drain(const std::atomic<bool>* abort, int64_t timeoutMs);
  // Cancels every op that has not started (the running one finishes).
  void cancelPending(const Status& why);
  uint64_t completed() const { return completed_.load(); }
  // Whether the caller is the progress thread (it runs the queued work
  // and must not wait for itself).
  bool onThread() const { return std::this_thread::get_id() == threadId_.load(); }

 private:
  void loop();
  Status waitUntil(std::unique_lock<std::mutex>& g, const std::atomic<bool>* abort,
                   int64_t timeoutMs, const char* what, bool (OpQueue::*ready)(size_t) const,
                   size_t arg);
  bool emptyNow(size_t) const { return pending_.load() == 0; }
  // Room for an op when nothing waits, or what waits holds at most limit.
  bool roomFor(size_t limit) const {
    return queue_.empty() || (held_ <= limit && queue_.size() < kMaxQueued);
  }
  // Ops waiting behind the running one at most: each holds its staging
  // until its streams are done with it, and the pool keeps a few dozen
  // blocks (stream_bridge.h); more in flight would allocate afresh.
  static constexpr size_t kMaxQueued = 4;

  const int rank_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<QueuedOp>> queue_;
  size_t held_ = 0;  // heldBytes() of the queued ops (not the running one)
  std::atomic<uint32_t> pending_{0};  // queued + running
  std::atomic<uint64_t> completed_{0};
  bool stop_ = false;
  std::thread thread_;
  std::atomic<std::thread::id> threadId_{};
};

}  // namespace ferry
