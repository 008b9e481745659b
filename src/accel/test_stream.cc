#include "accel/test_stream.h"

#include <atomic>
#include <chrono>

namespace ferry::accel {

TestStream::TestStream(const std::atomic<int64_t>* delayUs)
    : delayUs_(delayUs), worker_([this] { run(); }) {}

TestStream::~TestStream() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void TestStream::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> g(mu_);
    tasks_.push_back(std::move(task));
    ++enqueued_;
  }
  cv_.notify_all();
}

Status TestStream::drain(int64_t timeoutMs) {
  std::unique_lock<std::mutex> g(mu_);
  const uint64_t target = enqueued_;
  auto done = [&] { return completed_ >= target; };
  if (timeoutMs <= 0) {
    cv_.wait(g, done);
    return Status::ok();
  }
  if (cv_.wait_for(g, std::chrono::milliseconds(timeoutMs), done)) return Status::ok();
  return timeoutError("test device stream: " + std::to_string(target - completed_) +
                      " task(s) still pending after " + std::to_string(timeoutMs) + " ms");
}

bool TestStream::idle() {
  std::lock_guard<std::mutex> g(mu_);
  return completed_ == enqueued_;
}

void TestStream::run() {
  std::unique_lock<std::mutex> g(mu_);
  for (;;) {
    cv_.wait(g, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop_ and nothing left
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    g.unlock();
    if (int64_t us = delayUs_->load(); us > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    task();
    g.lock();
    ++completed_;
    cv_.notify_all();
  }
}

}  // namespace ferry::accel
