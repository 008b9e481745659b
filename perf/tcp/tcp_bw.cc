// tcp_bw: raw TCP throughput between two endpoints, the ceiling any TCP-based
// collective can reach on the same link (cluster_bench.sh divides busbw by it).
//
//   tcp_bw --server [--bind ADDR] [--port P] [--timeout S]
//   tcp_bw --client ADDR [--port P] [--streams N] [--duration S] [--msg BYTES] [--timeout S]
//
// The client opens N connections; each first sends an 8-byte header (magic,
// stream count) so the server knows how many to accept, then streams --msg
// sized writes for --duration seconds and half-closes. The server counts what
// it received on each connection and answers with that count; the client
// reports acknowledged bytes over the time from the first write to the last
// answer, so bytes still queued in socket buffers are never counted as sent.
// Both sides give up after --timeout seconds (alarm) instead of hanging.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr uint32_t kMagic = 0x46544257;  // "FTBW"
constexpr int kMaxStreams = 64;

struct Opts {
  bool server = false;
  std::string addr;  // client: server address; server: bind address
  int port = 29600;
  int streams = 1;
  double duration = 3.0;
  size_t msg = 1 << 20;
  int timeout = 60;
};

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "tcp_bw: %s: %s\n", what, strerror(errno));
  exit(1);
}

void usage() {
  fprintf(stderr,
          "usage: tcp_bw --server [--bind ADDR] [--port P] [--timeout S]\n"
          "       tcp_bw --client ADDR [--port P] [--streams N] [--duration S] [--msg BYTES] [--timeout S]\n");
  exit(2);
}

Opts parse(int argc, char** argv) {
  Opts o;
  bool client = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : (usage(), ""); };
    if (a == "--server") o.server = true;
    else if (a == "--client") client = true, o.addr = next();
    else if (a == "--bind") o.addr = next();
    else if (a == "--port") o.port = atoi(next());
    else if (a == "--streams") o.streams = atoi(next());
    else if (a == "--duration") o.duration = atof(next());
    else if (a == "--msg") o.msg = strtoull(next(), nullptr, 10);
    else if (a == "--timeout") o.timeout = atoi(next());
    else usage();
  }
  if (o.server == client || o.streams < 1 || o.streams > kMaxStreams || o.msg == 0 || o.duration <= 0 ||
      o.port <= 0 || o.port > 65535)
    usage();
  return o;
}

sockaddr_in makeAddr(const std::string& host, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(port));
  if (host.empty()) sa.sin_addr.s_addr = htonl(INADDR_ANY);
  else if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    fprintf(stderr, "tcp_bw: '%s' is not a numeric IPv4 address\n", host.c_str());
    exit(2);
  }
  return sa;
}

bool readFull(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r, n -= size_t(r);
  }
  return true;
}

bool writeFull(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t r = write(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r, n -= size_t(r);
  }
  return true;
}

// Receives until EOF, then answers with the byte count.
void serveStream(int fd, uint64_t* got) {
  std::vector<char> buf(1 << 20);
  uint64_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += uint64_t(r);
  }
  *got = n;
  if (!writeFull(fd, &n, sizeof(n))) fprintf(stderr, "tcp_bw: server: answering a stream: %s\n", strerror(errno));
  close(fd);
}

int runServer(const Opts& o) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) die("socket");
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa = makeAddr(o.addr, o.port);
  if (bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) die("bind");
  if (listen(ls, kMaxStreams) != 0) die("listen");
  fprintf(stderr, "tcp_bw: server listening on %s:%d\n", o.addr.empty() ? "*" : o.addr.c_str(), o.port);
  std::vector<int> fds;
  uint32_t want = 1;
  while (fds.size() < want) {
    int fd = accept(ls, nullptr, nullptr);
    if (fd < 0) die("accept");
    uint32_t hdr[2];
    if (!readFull(fd, hdr, sizeof(hdr)) || hdr[0] != kMagic || hdr[1] < 1 || hdr[1] > kMaxStreams) {
      fprintf(stderr, "tcp_bw: server: dropped a connection without a valid header\n");
      close(fd);
      continue;
    }
    want = hdr[1];
    fds.push_back(fd);
  }
  std::vector<uint64_t> got(fds.size());
  std::vector<std::thread> ts;
  for (size_t i = 0; i < fds.size(); ++i) ts.emplace_back(serveStream, fds[i], &got[i]);
  uint64_t total = 0;
  for (size_t i = 0; i < ts.size(); ++i) ts[i].join(), total += got[i];
  printf("tcp_bw server: %zu streams, %llu bytes received\n", fds.size(), (unsigned long long)total);
  close(ls);
  return 0;
}

int connectRetry(const sockaddr_in& sa) {
  for (int attempt = 0;; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0) return fd;
    int e = errno;
    close(fd);
    // The server may not be listening yet; the alarm bounds the retries.
    if (e != ECONNREFUSED && e != ETIMEDOUT && e != EHOSTUNREACH) errno = e, die("connect");
    usleep(20000);
  }
}

int runClient(const Opts& o) {
  sockaddr_in sa = makeAddr(o.addr, o.port);
  std::vector<int> fds;
  for (int i = 0; i < o.streams; ++i) {
    int fd = connectRetry(sa);
    uint32_t hdr[2] = {kMagic, uint32_t(o.streams)};
    if (!writeFull(fd, hdr, sizeof(hdr))) die("sending the header");
    fds.push_back(fd);
  }
  std::vector<char> buf(o.msg, 'x');
  std::vector<uint64_t> acked(fds.size());
  std::atomic<bool> failed{false};
  auto t0 = std::chrono::steady_clock::now();
  auto stopAt = t0 + std::chrono::duration<double>(o.duration);
  std::vector<std::thread> ts;
  for (size_t i = 0; i < fds.size(); ++i) {
    ts.emplace_back([&, i] {
      int fd = fds[i];
      while (std::chrono::steady_clock::now() < stopAt) {
        if (!writeFull(fd, buf.data(), buf.size())) { failed = true; break; }
      }
      shutdown(fd, SHUT_WR);
      if (!readFull(fd, &acked[i], sizeof(uint64_t))) failed = true;
      close(fd);
    });
  }
  uint64_t total = 0;
  for (size_t i = 0; i < ts.size(); ++i) ts[i].join(), total += acked[i];
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (failed) {
    fprintf(stderr, "tcp_bw: client: a stream failed (connection lost)\n");
    return 1;
  }
  printf("tcp_bw streams=%d msg=%zu seconds=%.3f bytes=%llu GB/s=%.3f\n", o.streams, o.msg, secs,
         (unsigned long long)total, double(total) / secs / 1e9);
  return 0;
}

void onAlarm(int) {
  static const char m[] = "tcp_bw: timed out (--timeout)\n";
  ssize_t r = write(STDERR_FILENO, m, sizeof(m) - 1);
  (void)r;
  _exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  Opts o = parse(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGALRM, onAlarm);
  alarm(unsigned(o.timeout));
  return o.server ? runServer(o) : runClient(o);
}
