// The harness shared by fi_bw (libfabric) and ferry_net_bw (Ferry's Socket
// network through its ncclNet_v11 API): options, an out-of-band TCP socket
// for the plan, barriers and "all received" notes, and the streaming loop.
// Each driver only supplies a Transport (post a send/receive on a slot, poll
// completions), so both move the same bytes with the same window, timing and
// checks, and only the network differs.
//
//   DRIVER --server [--bind ADDR] [--port P] [--timeout S] [driver options]
//   DRIVER --client ADDR [--port P] [-b MIN] [-e MAX] [-f FACTOR | --sizes A,B,..] [--window W]
//          [--bytes B] [--min-msgs N] [--mode uni|bidir|both] [--idle-us U] [--timeout S]
//          [driver options]
//   DRIVER --fork [same as --client]      # both roles on 127.0.0.1
//
// The client sends the plan (modes, sizes, message counts, window) to the
// server over the out-of-band socket, so the server takes no sizes. Per
// point: untimed warm-up of `window` messages, barrier, then the timer runs
// from the first post until every local operation completed *and* the peer
// said (out of band) that it received everything, so bytes still queued in
// socket buffers are never counted. uni: the client sends, the server
// receives, GB/s = bytes / time. bidir: both send and receive at once, GB/s
// = bytes of both directions / time. Every message carries its sequence
// number in its first and last 8 bytes and the receiver checks it (a
// misordered or torn message fails the run, exit 7).
//
// --idle-us U sleeps U us after a poll that completed nothing (a caller that
// backs off instead of spinning; with Ferry's caller-driven Socket network no
// byte moves meanwhile). Default 0: spin.
//
// Output (client, stdout): '#' comment lines, then one row per point:
//   MODE SIZE MSGS WINDOW GBPS
// Every wait is bounded: --timeout (default 60 s) arms alarm() in both roles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ferry::perfbw {

struct Opts {
  enum Role { kNone, kServer, kClient, kFork } role = kNone;
  std::string addr;        // client: server address; server: bind address
  int port = 29620;        // out-of-band port; a driver may use port+1 for itself
  size_t minBytes = 64 << 10, maxBytes = 64 << 20;
  int factor = 4;
  std::vector<size_t> sizes;  // --sizes a,b,c: exactly these (instead of -b/-e/-f)
  int window = 4;          // messages in flight per direction
  size_t bytesPerPoint = 256u << 20;
  int minMsgs = 8;
  bool uni = true, bidir = true;
  int timeoutS = 60;
  int idleUs = 0;          // sleep this long after a poll that finished nothing (0: spin)
  std::vector<std::pair<std::string, std::string>> extra;  // driver options: --name value
};

// Parses the common options; a `--name value` pair in driverOpts is kept in
// Opts::extra (value "" for a flag listed with a trailing '!', e.g. "quiet!").
Opts parseOpts(int argc, char** argv, const char* prog, const std::vector<std::string>& driverOpts,
               const char* driverUsage);
const std::string* extraOpt(const Opts& o, const std::string& name);

[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

double nowSec();

// What a driver implements. Slots 0..window-1 exist per direction; a slot is
// reused only after its completion was reported by poll().
class Transport {
 public:
  virtual ~Transport() = default;
  // Post `len` bytes from (send) or into (receive) buf on slot. false: not
  // now (resources busy); the harness polls and retries.
  virtual bool post(bool send, int slot, char* buf, size_t len) = 0;
  // Progress and report finished operations as (send, slot).
  virtual void poll(std::vector<std::pair<bool, int>>* done) = 0;
  // After each poll: whether it finished something. A driver whose library
  // has its own way for a caller to wait (Ferry's Waiter) waits here; the
  // default is to spin (and --idle-us).
  virtual void afterPoll(bool finished) { (void)finished; }
};

// The out-of-band socket between the two roles.
class Oob {
 public:
  static Oob serve(const std::string& bind, int port, double deadline);
  static Oob connect(const std::string& host, int port, double deadline);
  ~Oob();
  Oob(Oob&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Oob(const Oob&) = delete;
  void send(const void* p, size_t n);
  void recv(void* p, size_t n, double deadline);
  template <typename T> void sendv(const T& v) { send(&v, sizeof(v)); }
  template <typename T> T recvv(double deadline) { T v; recv(&v, sizeof(v), deadline); return v; }
  void barrier(double deadline);  // both sides: a byte each way
  int fd() const { return fd_; }

 private:
  explicit Oob(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Runs the whole benchmark on an established transport: the client decides
// the plan and prints the rows; the server follows it. `label` is printed in
// the client's header. Returns the process exit code.
// makeTransport is called once the plan is known (max size, window), with
// the buffers it must be able to use (registration).
struct Buffers {
  std::vector<char*> send, recv;  // window buffers of maxBytes each, per direction
  size_t bytes = 0;
};
int runBench(const Opts& o, Oob& oob, Transport& t, const Buffers& bufs, const std::string& label);

// Allocates (page-aligned, pre-faulted) window buffers of the given size.
Buffers allocBuffers(int window, size_t bytes);

// The plan's size bounds the buffers need before the transport exists: the
// client sends them first, the server reads them. Returns {window, maxBytes}.
std::pair<int, size_t> exchangeShape(const Opts& o, Oob& oob, bool client);

// --fork: runs childMain (the server role) in a child process and returns the
// parent's role (client to 127.0.0.1); at exit the parent reaps the child.
void forkServer(Opts* o, int (*serverMain)(Opts));
int reapChild(int rc);

void armTimeout(int seconds, const char* prog);

}  // namespace ferry::perfbw
