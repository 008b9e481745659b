// TCP helpers with deadlines and abort flags.
//
// Every socket made here is non-blocking and close-on-exec; the blocking-style
// helpers (connect/accept/sendAll/recvAll) poll in short slices so that a set
// abort flag is noticed within ~kSliceMs and no call outlives its deadline.
// A peer that closes or resets the connection (or a network error on the
// way to it: abort, timeout, unreachable) is reported as Code::kRemote
// naming the peer's address.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include <sys/uio.h>

#include "core/status.h"
#include "net/interfaces.h"
#include "net/sock_addr.h"

namespace ferry {

// When a blocking helper must give up: an absolute deadline (nowMs() clock)
// and up to two abort flags (e.g. the communicator's and the object's own).
struct Until {
  static constexpr int kSliceMs = 20;

  int64_t startMs = 0;
  int64_t deadlineMs = 0;
  const std::atomic<bool>* abort = nullptr;
  const std::atomic<bool>* abort2 = nullptr;

  static Until after(int64_t timeoutMs, const std::atomic<bool>* abortFlag = nullptr,
                     const std::atomic<bool>* abortFlag2 = nullptr);
  bool aborted() const;
  // Aborted or past the deadline (cheap; check() then builds the message).
  bool expired() const;
  int64_t remainingMs() const;
  // Poll timeout for one slice: min(remaining, kSliceMs), never negative.
  int sliceMs() const;
  // Ok while neither aborted nor past the deadline; otherwise the error to
  // return, naming `what` ("connecting to 10.0.0.1<5000>").
  Status check(const std::string& what) const;
};

class Socket {
 public:
  Socket() = default;
  Socket(int fd, const SockAddr& peer) : fd_(fd), peer_(peer) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_), peer_(o.peer_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // The remote address (connected sockets) or the bound address (listeners).
  const SockAddr& peer() const { return peer_; }
  void close();
  // Give up ownership of the fd without closing it.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Wake up anyone polling this socket (safe while others use the fd, unlike close).
  void shutdown();

 private:
  int fd_ = -1;
  SockAddr peer_;
};

Status setNonBlocking(int fd);
Status setNoDelay(int fd);

// Listen on `bindAddr` (port 0: an ephemeral port). peer() of the result is
// the actual bound address, port included.
Result<Socket> listenSocket(const SockAddr& bindAddr, int backlog = 1024);

// Connect, retrying refused/unreachable attempts with growing pauses until
// the deadline (the listener may not be up yet).
Result<Socket> connectSocket(const SockAddr& to, const Until& until);

// Wait for and accept one connection.
Result<Socket> acceptSocket(const Socket& listener, const Until& until);

Status sendAll(const Socket& s, const void* data, size_t bytes, const Until& until);
Status recvAll(const Socket& s, void* data, size_t bytes, const Until& until);

// Send to `out` and receive from `in` at the same time, so a ring of ranks
// that all send before they receive cannot deadlock on full socket buffers.
Status sendRecvAll(const Socket& out, const void* sdata, size_t sbytes, const Socket& in,
                   void* rdata, size_t rbytes, const Until& until);

// One non-blocking attempt: bytes moved (0 = the socket would block).
// recvSome reports the peer's close (FIN, or a reset after it) as an error,
// or, when `eof` is given, as 0 bytes with *eof set (for callers to whom a
// close between messages is normal).
Result<size_t> sendSome(const Socket& s, const void* data, size_t bytes);
Result<size_t> recvSome(const Socket& s, void* data, size_t bytes, bool* eof = nullptr);
// The same over several buffers in one system call (sendmsg/readv): a header
// and its payload, or a payload and the next header, without a call each.
Result<size_t> sendSomeV(const Socket& s, const iovec* iov, int n);
Result<size_t> recvSomeV(const Socket& s, const iovec* iov, int n, bool* eof = nullptr);

// Peeking: after setPeekOffset (SO_PEEK_OFF; false where the kernel does not
// offer it for TCP, before Linux 6.10), each peekSome returns only bytes no
// earlier peek returned, without dequeuing them; recvSome then dequeues from
// the front (already peeked bytes first). Errors and `eof` as recvSome.
bool setPeekOffset(const Socket& s);
Result<size_t> peekSome(const Socket& s, void* data, size_t bytes, bool* eof = nullptr);

}  // namespace ferry
