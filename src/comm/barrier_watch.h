// BarrierWatch: the waiting half of device-window barriers, on a host thread.
//
// A barrier of a device-direct operation (comm/device_direct.h) is stream
// work: the stream raises this rank's flag in its sync page to the
// barrier's number (mem/node_sync.h), then waits until a gate flag of the
// communicator reaches that number. This thread, one per communicator that
// runs such operations, waits for every rank's flag to reach the number and
// then raises the gate. On CUDA the stream's wait is cuStreamWaitValue32 on
// registered memory, so no host function ever blocks. That matters because
// CUDA may run the host functions of all streams one at a time: a barrier
// waiting in one held back the host function that would raise another
// communicator's flag, and two ranks whose streams reached two
// communicators' barriers in opposite orders stalled until the timeout.
//
// Here the waits see the deadline (from this rank's arrival), the
// communicator's abort and its failures, its own or posted by another rank
// of the host. A barrier given up on is released all the same, with the
// communicator failed (and the host's other ranks told); once it failed,
// later barriers pass at once. One released because the communicator went
// with its stream still short of it is reported too.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "accel/host_flag.h"
#include "mem/node_sync.h"

namespace ferry {

class Comm;

class BarrierWatch {
 public:
  // gate: the flag the streams wait on (the backend's newFlag(), so that a
  // device can wait on it).
  BarrierWatch(Comm* comm, mem::NodeSync* sync, std::shared_ptr<accel::HostFlag> gate);
  // Releases every barrier added, then joins the thread.
  ~BarrierWatch();
  BarrierWatch(const BarrierWatch&) = delete;
  BarrierWatch& operator=(const BarrierWatch&) = delete;

  // Barrier g (numbers added in increasing order) is released once every
  // rank's flag reached it. With `mine`, it is an operation's first: the
  // ranks' descriptors are compared before the release.
  void add(uint32_t g, const mem::SymDescriptor* mine);
  // From now on barriers are released without waiting.
  void stop();

 private:
  struct Pending {
    uint32_t g;
    bool check;
    mem::SymDescriptor mine;
  };
  void run();
  void release(const Pending& p);

  Comm* comm_;
  mem::NodeSync* sync_;
  std::shared_ptr<accel::HostFlag> gate_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool quit_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace ferry
