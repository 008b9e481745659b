// Strangers for the bootstrap listener tests: idle connections, garbage
// floods, and the listening sockets of this process (found in /proc).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "net/socket.h"

namespace ferry::test {

// Ranks 0 and 1 of a new two-rank bootstrap, created on two threads.
Result<std::vector<std::unique_ptr<Bootstrap>>> bootstrapPair(int64_t timeoutMs);

// Ports of the TCP sockets this process listens on at 127.0.0.1.
std::set<int> ownLoopbackListeners();
SockAddr loopback(int port);

// Open n connections to `to` that never send anything.
std::vector<Socket> idleConnections(const SockAddr& to, int n);

// Number of lines of `path` that contain `needle`.
int countLines(const std::string& path, const std::string& needle);

// A thread that keeps connecting to its targets and sending garbage (random
// bytes, or a ConnHeader with a wrong secret), then closing.
class GarbageFlood {
 public:
  GarbageFlood() = default;
  ~GarbageFlood() { stop(); }
  void addTarget(const SockAddr& a);
  void start();
  void stop();
  uint64_t sent() const { return sent_.load(); }

 private:
  void run();
  std::mutex mu_;
  std::vector<SockAddr> targets_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0};
  std::thread thread_;
};

}  // namespace ferry::test
