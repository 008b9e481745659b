// The shared harness of fi_bw and ferry_net_bw (bw_common.h).
#include "perf/fabric/bw_common.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace ferry::perfbw {
namespace {

const char* gProg = "bw";
pid_t gChild = -1;

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = strtod(s, &end);
  size_t mul = 1;
  if (end && *end) {
    switch (*end) {
      case 'k': case 'K': mul = 1ull << 10; break;
      case 'm': case 'M': mul = 1ull << 20; break;
      case 'g': case 'G': mul = 1ull << 30; break;
      default: die("bad size '%s'", s);
    }
  }
  if (v <= 0) die("bad size '%s'", s);
  return static_cast<size_t>(v * static_cast<double>(mul));
}

[[noreturn]] void usage(const char* prog, const char* driverUsage) {
  fprintf(stderr,
          "usage: %s --server [--bind ADDR] [--port P] [--timeout S] [driver options]\n"
          "       %s --client ADDR | --fork  [--port P] [-b MIN] [-e MAX] [-f FACTOR | --sizes A,B,..] [--window W]\n"
          "            [--bytes B] [--min-msgs N] [--mode uni|bidir|both] [--timeout S] [driver options]\n"
          "driver options: %s\n",
          prog, prog, driverUsage);
  exit(2);
}

sockaddr_in resolve(const std::string& host, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (host.empty()) {
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    return sa;
  }
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) == 1) return sa;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) die("cannot resolve '%s'", host.c_str());
  sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return sa;
}

void waitFd(int fd, short ev, double deadline, const char* what) {
  for (;;) {
    double left = deadline - nowSec();
    if (left <= 0) die("timed out waiting for %s", what);
    pollfd p{fd, ev, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (rc > 0) return;
    if (rc < 0 && errno != EINTR) die("poll (%s): %s", what, strerror(errno));
  }
}

// Sequence stamps: first and last 8 bytes of every message.
void stamp(char* b, size_t len, uint64_t seq) {
  if (len < 16) return;
  memcpy(b, &seq, 8);
  memcpy(b + len - 8, &seq, 8);
}

bool stampOk(const char* b, size_t len, uint64_t seq) {
  if (len < 16) return true;
  uint64_t a, z;
  memcpy(&a, b, 8);
  memcpy(&z, b + len - 8, 8);
  return a == seq && z == seq;
}

struct Flow {
  bool send = false;
  int n = 0;  // messages to move
  int posted = 0, done = 0;
  uint64_t seq0 = 0;
  std::vector<int> free;
  std::vector<uint64_t> slotSeq;
  const std::vector<char*>* bufs = nullptr;

  Flow(bool s, int window, const std::vector<char*>* b) : send(s), slotSeq(window), bufs(b) {
    for (int i = window - 1; i >= 0; --i) free.push_back(i);
  }
  void next(int msgs) {  // a new batch continues the numbering
    seq0 += static_cast<uint64_t>(n);
    n = msgs;
    posted = done = 0;
  }
};

void postSome(Transport& t, Flow& f, size_t len) {
  while (f.posted < f.n && !f.free.empty()) {
    int slot = f.free.back();
    char* b = (*f.bufs)[slot];
    uint64_t seq = f.seq0 + static_cast<uint64_t>(f.posted);
    if (f.send) stamp(b, len, seq);
    if (!t.post(f.send, slot, b, len)) return;
    f.free.pop_back();
    f.slotSeq[slot] = seq;
    f.posted++;
  }
}

void drive(Transport& t, Flow& s, Flow& r, size_t len, double deadline, int idleUs) {
  std::vector<std::pair<bool, int>> done;
  unsigned spins = 0;
  while (s.done < s.n || r.done < r.n) {
    postSome(t, r, len);
    postSome(t, s, len);
    done.clear();
    t.poll(&done);
    for (auto [snd, slot] : done) {
      Flow& f = snd ? s : r;
      if (!snd && !stampOk((*f.bufs)[slot], len, f.slotSeq[slot])) {
        fprintf(stderr, "%s: message %llu of %zu bytes arrived wrong (stamp mismatch)\n", gProg,
                static_cast<unsigned long long>(f.slotSeq[slot]), len);
        exit(7);
      }
      f.free.push_back(slot);
      f.done++;
    }
    t.afterPoll(!done.empty());
    if (done.empty() && idleUs > 0) std::this_thread::sleep_for(std::chrono::microseconds(idleUs));
    if (done.empty() && (++spins & 1023) == 0 && nowSec() > deadline) {
      die("timed out moving %zu-byte messages: sent %d/%d, received %d/%d", len, s.done, s.n, r.done, r.n);
    }
  }
}

struct Point {
  uint32_t bidir;
  uint32_t msgs;
  uint64_t size;
};

}  // namespace

void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", gProg);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

double nowSec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Opts parseOpts(int argc, char** argv, const char* prog, const std::vector<std::string>& driverOpts,
               const char* driverUsage) {
  gProg = prog;
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(prog, driverUsage);
      return argv[++i];
    };
    if (a == "--server") o.role = Opts::kServer;
    else if (a == "--client") o.role = Opts::kClient, o.addr = next();
    else if (a == "--fork") o.role = Opts::kFork;
    else if (a == "--bind") o.addr = next();
    else if (a == "--port") o.port = atoi(next());
    else if (a == "-b" || a == "--minbytes") o.minBytes = parseSize(next());
    else if (a == "-e" || a == "--maxbytes") o.maxBytes = parseSize(next());
    else if (a == "-f" || a == "--stepfactor") o.factor = atoi(next());
    else if (a == "--sizes") {
      std::string list = next();
      for (size_t at = 0; at < list.size();) {
        size_t comma = list.find(',', at);
        if (comma == std::string::npos) comma = list.size();
        o.sizes.push_back(parseSize(list.substr(at, comma - at).c_str()));
        at = comma + 1;
      }
    } else if (a == "--window") o.window = atoi(next());
    else if (a == "--bytes") o.bytesPerPoint = parseSize(next());
    else if (a == "--min-msgs") o.minMsgs = atoi(next());
    else if (a == "--timeout") o.timeoutS = atoi(next());
    else if (a == "--idle-us") o.idleUs = atoi(next());
    else if (a == "--mode") {
      std::string m = next();
      o.uni = m == "uni" || m == "both";
      o.bidir = m == "bidir" || m == "both";
      if (!o.uni && !o.bidir) usage(prog, driverUsage);
    } else {
      bool known = false;
      for (const std::string& d : driverOpts) {
        bool flag = !d.empty() && d.back() == '!';
        std::string name = flag ? d.substr(0, d.size() - 1) : d;
        if (a == "--" + name) {
          o.extra.emplace_back(name, flag ? "" : next());
          known = true;
          break;
        }
      }
      if (!known) usage(prog, driverUsage);
    }
  }
  if (o.sizes.empty()) {
    for (size_t s = o.minBytes; s <= o.maxBytes && o.factor >= 2; s *= static_cast<size_t>(o.factor)) o.sizes.push_back(s);
  } else {
    o.minBytes = o.maxBytes = 0;
    for (size_t s : o.sizes) o.maxBytes = std::max(o.maxBytes, s);
  }
  if (o.role == Opts::kNone || o.port <= 0 || o.port > 65534 || o.window < 1 || o.window > 64 ||
      o.factor < 2 || o.minBytes > o.maxBytes || o.timeoutS < 1 || o.minMsgs < 1)
    usage(prog, driverUsage);
  return o;
}

const std::string* extraOpt(const Opts& o, const std::string& name) {
  for (auto it = o.extra.rbegin(); it != o.extra.rend(); ++it) {
    if (it->first == name) return &it->second;
  }
  return nullptr;
}

Oob Oob::serve(const std::string& bind, int port, double deadline) {
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0) die("socket: %s", strerror(errno));
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa = resolve(bind, port);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) die("bind port %d: %s", port, strerror(errno));
  if (listen(ls, 1) != 0) die("listen: %s", strerror(errno));
  waitFd(ls, POLLIN, deadline, "the client's out-of-band connection");
  int fd = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) die("accept: %s", strerror(errno));
  close(ls);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return Oob(fd);
}

Oob Oob::connect(const std::string& host, int port, double deadline) {
  sockaddr_in sa = resolve(host, port);
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return Oob(fd);
    }
    int err = errno;
    close(fd);
    if (err != ECONNREFUSED && err != EINTR && err != ETIMEDOUT && err != ENETUNREACH)
      die("connect %s:%d: %s", host.c_str(), port, strerror(err));
    if (nowSec() > deadline) die("connect %s:%d: %s (timed out)", host.c_str(), port, strerror(err));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Oob::~Oob() {
  if (fd_ >= 0) close(fd_);
}

void Oob::send(const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t r = ::send(fd_, c, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("out-of-band send: %s", strerror(errno));
    c += r, n -= static_cast<size_t>(r);
  }
}

void Oob::recv(void* p, size_t n, double deadline) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    waitFd(fd_, POLLIN, deadline, "the peer (out of band)");
    ssize_t r = ::recv(fd_, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) die("the peer closed the out-of-band connection");
    if (r < 0) die("out-of-band recv: %s", strerror(errno));
    c += r, n -= static_cast<size_t>(r);
  }
}

void Oob::barrier(double deadline) {
  char b = 'b';
  send(&b, 1);
  recv(&b, 1, deadline);
}

Buffers allocBuffers(int window, size_t bytes) {
  Buffers b;
  b.bytes = bytes;
  size_t rounded = (bytes + 4095) / 4096 * 4096;
  for (int i = 0; i < 2 * window; ++i) {
    char* p = static_cast<char*>(aligned_alloc(4096, rounded));
    if (!p) die("out of memory (%d buffers of %zu bytes)", 2 * window, bytes);
    memset(p, 0, rounded);  // fault the pages in before any timing
    (i < window ? b.send : b.recv).push_back(p);
  }
  return b;
}

std::pair<int, size_t> exchangeShape(const Opts& o, Oob& oob, bool client) {
  struct Shape {
    uint32_t window;
    uint64_t maxBytes;
  } s{};
  if (client) {
    s = {static_cast<uint32_t>(o.window), o.maxBytes};
    oob.sendv(s);
  } else {
    s = oob.recvv<Shape>(nowSec() + o.timeoutS);
  }
  return {static_cast<int>(s.window), static_cast<size_t>(s.maxBytes)};
}

int runBench(const Opts& o, Oob& oob, Transport& t, const Buffers& bufs, const std::string& label) {
  bool client = o.role != Opts::kServer;
  double deadline = nowSec() + o.timeoutS;
  std::vector<Point> plan;
  if (client) {
    for (int bidir = 0; bidir < 2; ++bidir) {
      if (bidir ? !o.bidir : !o.uni) continue;
      for (size_t s : o.sizes) {
        size_t msgs = std::max<size_t>(static_cast<size_t>(o.minMsgs), o.bytesPerPoint / s);
        plan.push_back({static_cast<uint32_t>(bidir), static_cast<uint32_t>(msgs), s});
      }
    }
    oob.sendv(static_cast<uint32_t>(plan.size()));
    oob.send(plan.data(), plan.size() * sizeof(Point));
    printf("# %s\n# window %zu messages in flight per direction; >= %zu bytes and >= %d messages per point\n"
           "# uni: client sends, server receives; bidir: both at once, GB/s counts both directions\n"
           "# %-5s %10s %6s %6s %8s\n",
           label.c_str(), bufs.send.size(), o.bytesPerPoint, o.minMsgs, "mode", "size", "msgs", "window",
           "GB/s");
    fflush(stdout);
  } else {
    auto n = oob.recvv<uint32_t>(deadline);
    plan.resize(n);
    oob.recv(plan.data(), n * sizeof(Point), deadline);
  }
  int window = static_cast<int>(bufs.send.size());
  for (const Point& p : plan) {
    if (p.size > bufs.bytes) die("plan size %llu above the buffers' %zu", (unsigned long long)p.size, bufs.bytes);
    Flow s(true, window, &bufs.send), r(false, window, &bufs.recv);
    bool sends = p.bidir || client, recvs = p.bidir || !client;
    // Warm-up: one window's worth each way that is used.
    int warm = std::min<int>(window, static_cast<int>(p.msgs));
    s.next(sends ? warm : 0);
    r.next(recvs ? warm : 0);
    drive(t, s, r, p.size, deadline, o.idleUs);
    oob.barrier(deadline);
    // Timed: receives are posted before the barrier, so the first message finds one.
    s.next(sends ? static_cast<int>(p.msgs) : 0);
    r.next(recvs ? static_cast<int>(p.msgs) : 0);
    postSome(t, r, p.size);
    oob.barrier(deadline);
    double t0 = nowSec();
    drive(t, s, r, p.size, deadline, o.idleUs);
    oob.barrier(deadline);  // the peer has received (and sent) everything too
    double sec = nowSec() - t0;
    if (client) {
      double bytes = static_cast<double>(p.size) * p.msgs * (p.bidir ? 2 : 1);
      printf("%-7s %10llu %6u %6d %8.3f\n", p.bidir ? "bidir" : "uni", (unsigned long long)p.size, p.msgs,
             window, bytes / sec / 1e9);
      fflush(stdout);
    }
  }
  oob.barrier(deadline);
  return 0;
}

void forkServer(Opts* o, int (*serverMain)(Opts)) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (pid == 0) {
    Opts s = *o;
    s.role = Opts::kServer;
    s.addr = "127.0.0.1";
    _exit(serverMain(s));
  }
  gChild = pid;
  o->role = Opts::kClient;
  o->addr = "127.0.0.1";
}

int reapChild(int rc) {
  if (gChild < 0) return rc;
  double deadline = nowSec() + 10;
  int status = 0;
  for (;;) {
    pid_t w = waitpid(gChild, &status, WNOHANG);
    if (w == gChild) break;
    if (w < 0) return rc ? rc : 1;
    if (nowSec() > deadline) {
      kill(gChild, SIGKILL);
      waitpid(gChild, &status, 0);
      fprintf(stderr, "%s: the server child did not exit; killed\n", gProg);
      return rc ? rc : 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  gChild = -1;
  int child = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return rc ? rc : child;
}

namespace {
void onAlarm(int) {
  static const char msg[] = ": timed out (--timeout); giving up\n";
  ssize_t r = write(2, gProg, strlen(gProg));
  r = write(2, msg, sizeof(msg) - 1);
  (void)r;
  if (gChild > 0) kill(gChild, SIGKILL);
  _exit(124);
}
}  // namespace

void armTimeout(int seconds, const char* prog) {
  gProg = prog;
  signal(SIGALRM, onAlarm);
  alarm(static_cast<unsigned>(seconds) + 5);  // the loops' own deadlines fire first
}

}  // namespace ferry::perfbw
