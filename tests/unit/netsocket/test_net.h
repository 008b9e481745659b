// Helpers for the Socket net tests: environment, connection setup through
// the v11 table, and blocking-with-deadline send/recv loops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nccl_net.h>

namespace ferry::nettest {

const ncclNet_v11_t* net();

// Set or unset a variable for the scope; config and the device list re-read it.
class Env {
 public:
  Env(const char* name, std::optional<std::string> value);
  ~Env();

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The Socket network on IPv4 loopback, warnings only, for the scope: helper
// threads (nullopt: unset, the default) and the retry window. Messages from
// 64 KiB on are streamed (the default; the retry tests rely on it).
struct LoopbackEnv {
  LoopbackEnv(std::optional<std::string> nthreads, const std::string& retryMs)
      : ifname("NCCL_SOCKET_IFNAME", "lo"),
        family("NCCL_SOCKET_FAMILY", "AF_INET"),
        threads("NCCL_SOCKET_NTHREADS", std::move(nthreads)),
        retry("FERRY_NET_RETRY_MS", retryMs),
        inlineBytes("FERRY_NET_SOCKET_INLINE_BYTES", "65536"),
        debug("NCCL_DEBUG", "WARN") {}
  Env ifname, family, threads, retry, inlineBytes, debug;
};

bool ipv6LoopbackUsable();

// One connected pair, created with a single thread alternating connect/accept.
struct Pair {
  void* ctxSend = nullptr;
  void* ctxRecv = nullptr;
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  ~Pair();
};
// Returns "" or what failed.
std::string connectPair(Pair& p, int64_t timeoutMs = 10000);

// Post (retrying while the comm is full) then test until done, error or
// deadline. The result is the first non-success code, or ncclSuccess;
// *size gets the size test() reported. ncclInProgress marks a timeout.
ncclResult_t sendWait(void* comm, void* data, size_t size, int64_t timeoutMs, int* size_out = nullptr);
ncclResult_t recvWait(void* comm, void* data, size_t size, int64_t timeoutMs, int* size_out = nullptr);
ncclResult_t waitDone(void* request, int64_t timeoutMs, int* size_out);

int64_t nowMs();
std::vector<char> pattern(size_t size, int salt);

}  // namespace ferry::nettest
