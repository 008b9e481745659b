// One testdev stream (test_device.h): a worker thread running tasks in the
// order they were enqueued.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "core/status.h"

namespace ferry::accel {

class TestStream {
 public:
  explicit TestStream(const std::atomic<int64_t>* delayUs);
  ~TestStream();  // runs what is queued, then stops
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;

  void enqueue(std::function<void()> task);
  // Until every task enqueued before this call has run; kTimeout after
  // timeoutMs (<= 0: no deadline).
  Status drain(int64_t timeoutMs);
  // Whether every task enqueued so far has run.
  bool idle();

 private:
  void run();

  const std::atomic<int64_t>* delayUs_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  uint64_t enqueued_ = 0, completed_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace ferry::accel
