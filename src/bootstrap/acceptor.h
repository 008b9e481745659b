// Acceptor: serves a bootstrap listening socket so that nobody who lacks the
// secret can delay a communicator's creation.
//
// Every waiting connection is accepted at once (non-blocking) and all of them
// are read in parallel in one poll() set, each only as far as it has sent:
//   1. the ConnHeader (secret, type) and the type's fixed head, within
//      headerMs of the accept; a wrong secret or type is refused on the spot;
//   2. the body, whose size the owner's Protocol decides from the head
//      (bounded before anything is allocated), pausing at most bodyMs;
// then the connection is handed to the owner (Incoming). Bounds: at most
// perSource connections from one address and maxHeader in all may be waiting
// for their header (the oldest is dropped to make room), at most
// maxAuthenticated may be past it. Refusals are logged through RefusalLog
// (rate-limited).
//
// Deadlines run only while the owner drives step(): time between two steps
// (a rank busy elsewhere) does not count against a connection.
// Not thread-safe: one thread drives step() (the owner's lock).
#pragma once

#include <poll.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/refusal_log.h"
#include "core/status.h"
#include "net/socket.h"

namespace ferry::bootstrap {

// What to do with a connection whose ConnHeader and head have arrived.
struct BodyPlan {
  enum Action { kRead, kPark, kRefuse };
  Action action = kRead;
  size_t bytes = 0;  // kRead: body bytes to read before handing the connection over
  std::string why;   // kRefuse: the reason (logged)

  static BodyPlan read(size_t n) { return {kRead, n, {}}; }
  // Leave the body unread (no memory, no deadline) until the owner calls revisit().
  static BodyPlan park() { return {kPark, 0, {}}; }
  static BodyPlan refuse(std::string why) { return {kRefuse, 0, std::move(why)}; }
};

class Protocol {
 public:
  virtual ~Protocol() = default;
  // Bytes that follow the ConnHeader on a connection of `type`; 0 refuses the type.
  virtual size_t headBytes(uint32_t type) const = 0;
  // The body of a connection whose head (headBytes(type) bytes) has arrived.
  virtual BodyPlan body(uint32_t type, const uint8_t* head) = 0;
  // A connection whose body() was kRead(bytes) was dropped before it completed.
  virtual void abandoned(uint32_t type, const uint8_t* head, size_t bytes) {}
};

struct Incoming {
  Socket sock;
  uint32_t type = 0;
  std::vector<uint8_t> head;
  std::vector<char> body;
};

struct AcceptorLimits {
  int64_t headerMs = 2000;        // accept -> ConnHeader + head complete
  int64_t bodyMs = 10000;         // longest pause while a body arrives
  size_t perSource = 128;         // waiting for their header, per source address
  size_t maxHeader = 1024;        // waiting for their header, in all (at most 1/4 of RLIMIT_NOFILE)
  size_t maxAuthenticated = 256;  // past the header: reading a body or parked
};

class Acceptor {
 public:
  // `where` names the listener in log lines ("rank 3 listener 10.0.0.1<5000>").
  Acceptor(std::string where, uint64_t secret, AcceptorLimits limits = {});
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  // One round: wait up to waitMs for the listener, the pending connections
  // and `extra` (the owner's own fds; their revents are filled in), accept
  // every waiting connection, read what has arrived and drop connections past
  // their deadline. Completed connections are appended to *done. An error
  // means poll() itself failed.
  Status step(const Socket& listener, Protocol& proto, int waitMs, std::vector<pollfd>* extra,
              std::vector<Incoming>* done);
  // The owner's expectations changed: ask Protocol::body() again for the
  // parked connections at the next step().
  void revisit() { revisit_ = true; }
  // Log a refusal decided by the owner through the same rate limit.
  void refused(const std::string& line) { log_.note(line); }
  size_t pending() const { return conns_.size(); }
  uint64_t refusals() const { return log_.total(); }

 private:
  struct Conn;
  void acceptAll(const Socket& listener, Protocol& proto, std::vector<Incoming>* done);
  void makeRoom(const std::string& source);
  void progress(Conn& c, Protocol& proto, std::vector<Incoming>* done);
  void decide(Conn& c, Protocol& proto, std::vector<Incoming>* done);
  void complete(Conn& c, std::vector<Incoming>* done);
  void drop(Conn& c, const std::string& why, Protocol* proto = nullptr);

  std::string where_;
  uint64_t secret_;
  AcceptorLimits limits_;
  RefusalLog log_;
  std::vector<std::unique_ptr<Conn>> conns_;  // oldest first
  bool revisit_ = false;
  int64_t acceptPauseUntilMs_ = 0;  // after EMFILE and the like
  int64_t lastStepMs_ = 0;          // end of the previous step()
};

}  // namespace ferry::bootstrap
