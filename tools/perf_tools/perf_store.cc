#include "tools/perf_tools/perf_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>

namespace ferry::perf {
namespace {

using Clock = std::chrono::steady_clock;

// A magic prefix so a rank that reached some other service fails clearly
// instead of using garbage as its id.
constexpr char kMagic[8] = {'F', 'E', 'R', 'R', 'Y', 'I', 'D', '1'};
constexpr size_t kMaxId = 256;

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

bool resolve(const std::string& host, int port, sockaddr_in* out) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    std::fprintf(stderr, "store: cannot resolve '%s': %s\n", host.c_str(), gai_strerror(rc));
    return false;
  }
  *out = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  out->sin_port = htons(static_cast<uint16_t>(port));
  freeaddrinfo(res);
  return true;
}

// Moves size bytes in the direction of `send`, polling so the deadline holds.
bool transfer(int fd, void* buf, size_t size, bool send, Clock::time_point deadline) {
  auto* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < size) {
    pollfd pfd{fd, static_cast<short>(send ? POLLOUT : POLLIN), 0};
    int left = msLeft(deadline);
    if (left == 0 || poll(&pfd, 1, left) <= 0) {
      errno = errno == 0 ? ETIMEDOUT : errno;
      return false;
    }
    ssize_t n = send ? ::send(fd, p + done, size - done, MSG_NOSIGNAL)
                     : ::recv(fd, p + done, size - done, 0);
    if (n == 0) errno = ECONNRESET;
    if (n <= 0) {
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

bool storeServe(const std::string& host, int port, int clients, const void* id, size_t size,
                int timeoutSec) {
  unsigned char msg[sizeof kMagic + kMaxId];
  if (size > kMaxId) return false;
  sockaddr_in addr{};
  if (!resolve(host, port, &addr)) return false;
  // A host name may resolve to 127.0.1.1 on rank 0's own node while the
  // others reach it by its network address, so names bind every interface;
  // a numeric address (127.0.0.1 in tests) binds exactly that one.
  in_addr numeric{};
  if (inet_pton(AF_INET, host.c_str(), &numeric) != 1) addr.sin_addr.s_addr = htonl(INADDR_ANY);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(fd, clients + 1) != 0) {
    std::fprintf(stderr, "store: cannot listen on %s:%d: %s\n", host.c_str(), port,
                 std::strerror(errno));
    if (fd >= 0) close(fd);
    return false;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(timeoutSec);
  bool ok = true;
  for (int served = 0; ok && served < clients; ++served) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, msLeft(deadline)) <= 0) {
      std::fprintf(stderr,
                   "store: only %d of %d ranks connected to %s:%d within %d s (are all ranks "
                   "started with the same MASTER_ADDR/MASTER_PORT?)\n",
                   served, clients, host.c_str(), port, timeoutSec);
      ok = false;
      break;
    }
    int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      std::fprintf(stderr, "store: accept on %s:%d: %s\n", host.c_str(), port,
                   std::strerror(errno));
      ok = false;
      break;
    }
    std::memcpy(msg, kMagic, sizeof kMagic);
    std::memcpy(msg + sizeof kMagic, id, size);
    if (!transfer(c, msg, sizeof kMagic + size, true, deadline)) {
      std::fprintf(stderr, "store: sending the id: %s\n", std::strerror(errno));
      ok = false;
    }
    close(c);
  }
  close(fd);
  return ok;
}

bool storeFetch(const std::string& host, int port, void* id, size_t size, int timeoutSec) {
  if (size > kMaxId) return false;
  sockaddr_in addr{};
  if (!resolve(host, port, &addr)) return false;
  const auto deadline = Clock::now() + std::chrono::seconds(timeoutSec);
  int lastErr = 0;
  auto pause = std::chrono::milliseconds(10);
  while (msLeft(deadline) > 0) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      std::fprintf(stderr, "store: socket: %s\n", std::strerror(errno));
      return false;
    }
    // Rank 0 may not listen yet: refused connections are retried.
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      lastErr = errno;
      close(fd);
      std::this_thread::sleep_for(std::min(pause, std::chrono::milliseconds(msLeft(deadline))));
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
      continue;
    }
    unsigned char msg[sizeof kMagic + kMaxId];
    bool ok = transfer(fd, msg, sizeof kMagic + size, false, deadline);
    lastErr = errno;
    close(fd);
    if (!ok) {
      std::fprintf(stderr, "store: reading the id from %s:%d: %s\n", host.c_str(), port,
                   std::strerror(lastErr));
      return false;
    }
    if (std::memcmp(msg, kMagic, sizeof kMagic) != 0) {
      std::fprintf(stderr, "store: %s:%d is not a ferry perf store (bad greeting)\n",
                   host.c_str(), port);
      return false;
    }
    std::memcpy(id, msg + sizeof kMagic, size);
    return true;
  }
  std::fprintf(stderr, "store: cannot reach rank 0's store at %s:%d within %d s (last error: %s)\n",
               host.c_str(), port, timeoutSec, std::strerror(lastErr));
  return false;
}

}  // namespace ferry::perf
