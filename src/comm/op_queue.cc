#include "comm/op_queue.h"

#include <chrono>

#include "core/log.h"
#include "core/wait.h"

namespace ferry {

OpQueue::~OpQueue() {
  cancelPending(invalidUsage("the communicator was destroyed before this operation ran"));
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status OpQueue::push(std::shared_ptr<QueuedOp> op, size_t maxHeldBytes,
                     const std::atomic<bool>* abort, int64_t timeoutMs) {
  std::unique_lock<std::mutex> g(mu_);
  const size_t need = op->heldBytes();
  FERRY_TRY(waitUntil(g, abort, timeoutMs, "room in the stream queue", &OpQueue::roomFor,
                      maxHeldBytes >= need ? maxHeldBytes - need : 0));
  if (stop_) return invalidUsage("the communicator is being destroyed");
  held_ += op->heldBytes();
  queue_.push_back(std::move(op));
  pending_.fetch_add(1, std::memory_order_acq_rel);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  g.unlock();
  cv_.notify_all();
  return Status::ok();
}

Status OpQueue::drain(const std::atomic<bool>* abort, int64_t timeoutMs) {
  std::unique_lock<std::mutex> g(mu_);
  return waitUntil(g, abort, timeoutMs, "the stream queue to drain", &OpQueue::emptyNow, 0);
}

// The deadline is per op: it restarts whenever one completes, so a long
// queue of operations that each progress is not a timeout.
Status OpQueue::waitUntil(std::unique_lock<std::mutex>& g, const std::atomic<bool>* abort,
                          int64_t timeoutMs, const char* what, bool (OpQueue::*ready)(size_t) const,
                          size_t arg) {
  uint64_t seen = completed_.load();
  int64_t end = nowMs() + timeoutMs;
  while (!(this->*ready)(arg)) {
    if (abort && abort->load()) return remoteError(std::string("aborted while waiting for ") + what);
    if (uint64_t c = completed_.load(); c != seen) {
      seen = c;
      end = nowMs() + timeoutMs;
    }
    if (nowMs() >= end)
      return timeoutError(std::string("no operation of the stream queue completed in ") +
                          std::to_string(timeoutMs) + " ms while waiting for " + what);
    cv_.wait_for(g, std::chrono::milliseconds(10));
  }
  return Status::ok();
}

void OpQueue::cancelPending(const Status& why) {
  std::deque<std::shared_ptr<QueuedOp>> dropped;
  {
    std::lock_guard<std::mutex> g(mu_);
    dropped.swap(queue_);
    held_ = 0;
  }
  for (auto& op : dropped) {
    op->cancel(why);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
    completed_.fetch_add(1);
  }
  cv_.notify_all();
}

void OpQueue::loop() {
  threadId_.store(std::this_thread::get_id());
  log::setThreadRank(rank_);
  std::unique_lock<std::mutex> g(mu_);
  for (;;) {
    cv_.wait(g, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::shared_ptr<QueuedOp> op = std::move(queue_.front());
    queue_.pop_front();
    held_ -= op->heldBytes();
    g.unlock();
    op->run();
    op.reset();
    g.lock();
    pending_.fetch_sub(1, std::memory_order_acq_rel);
    completed_.fetch_add(1);
    cv_.notify_all();
  }
}

}  // namespace ferry
