// A small NCCL net plugin over loopback TCP, used to exercise Ferry's plugin
// loader and its old-version adapters. Built twice from this file:
// libnccl-net-ferrytest.so exports ncclNetPlugin_v8 and
// libnccl-net-ferrytest6.so exports ncclNetPlugin_v6 (FERRYTEST_NET_VERSION).
//
// Wire format: every message is an 8-byte little-endian size, then the bytes.
// Each comm keeps up to 32 requests, progressed strictly in posting order by
// test(). All calls are nonblocking; connect keeps its progress in the
// caller's handle, which the caller passes again on every retry (as NCCL does).
//
// Like some real plugins, the exported table holds only name and init until
// init runs and fills in the rest, so a loader that copies function pointers
// before init breaks here.
//
// Closing a comm with requests in flight (posted and not yet tested
// complete) is counted (ferrytestInflightCloses) and WARNed about; with
// FERRYTEST_STRICT_CLOSE=1 it aborts the process, as a stand-in for plugins
// that tear down an endpoint shared by all connections of the thread then.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nccl_net.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#ifndef FERRYTEST_NET_VERSION
#define FERRYTEST_NET_VERSION 8
#endif

namespace {

ncclDebugLogger_t gLog = nullptr;
#define FT_WARN(...) \
  do { if (gLog) gLog(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__); } while (0)

constexpr uint32_t kMagic = 0x66747374;  // "ftst"
struct Handle {
  uint32_t magic;
  uint16_t port;
  int stage;  // connect progress: 0 nothing, 1 connecting, 2 connected
  int fd;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle too large");

constexpr int kMaxReqs = 32;
struct Comm;
struct Request {
  Comm* comm;
  bool used, isSend, done;
  char* data;
  size_t capacity;   // posted size (receive: buffer size)
  uint64_t size;     // message size (known after the header for a receive)
  size_t hdrDone, bodyDone;
};
struct Comm {
  int fd;
  bool failed;
  Request reqs[kMaxReqs];
  int queue[kMaxReqs];  // request indices in posting order
  int head, count;
};
struct ListenComm {
  int fd;
};
int gMrToken;  // registrations need a non-NULL handle and nothing else

ncclResult_t sysFail(const char* what) {
  FT_WARN("ferrytest: %s failed: %s", what, strerror(errno));
  return ncclSystemError;
}

Comm* newComm(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  Comm* c = new (std::nothrow) Comm{};
  if (c) c->fd = fd;
  return c;
}

// Moves bytes of one transfer; returns -1 on error, else bytes moved (0 = would block).
ssize_t move(Comm* c, bool isSend, char* p, size_t n) {
  ssize_t r = isSend ? send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(c->fd, p, n, MSG_DONTWAIT);
  if (r > 0) return r;
  if (r == 0 && !isSend) { FT_WARN("ferrytest: peer closed the connection"); return -1; }
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  FT_WARN("ferrytest: %s: %s", isSend ? "send" : "recv", strerror(errno));
  return -1;
}

// Advance one request: 1 done, 0 blocked, -1 error.
int advance(Comm* c, Request& r) {
  while (r.hdrDone < sizeof(r.size)) {
    ssize_t m = move(c, r.isSend, reinterpret_cast<char*>(&r.size) + r.hdrDone, sizeof(r.size) - r.hdrDone);
    if (m <= 0) return static_cast<int>(m);
    r.hdrDone += m;
  }
  if (!r.isSend && r.size > r.capacity) {
    FT_WARN("ferrytest: message of %lu bytes for a %zu-byte receive", (unsigned long)r.size, r.capacity);
    return -1;
  }
  while (r.bodyDone < r.size) {
    ssize_t m = move(c, r.isSend, r.data + r.bodyDone, r.size - r.bodyDone);
    if (m <= 0) return static_cast<int>(m);
    r.bodyDone += m;
  }
  return 1;
}

bool progress(Comm* c) {
  while (!c->failed && c->count > 0) {
    Request& r = c->reqs[c->queue[c->head]];
    int st = advance(c, r);
    if (st < 0) c->failed = true;
    if (st <= 0) break;
    r.done = true;
    c->head = (c->head + 1) % kMaxReqs;
    c->count--;
  }
  return !c->failed;
}

ncclResult_t post(void* comm, bool isSend, void* data, size_t size, void** request) {
  Comm* c = static_cast<Comm*>(comm);
  *request = nullptr;
  if (c->failed) return ncclSystemError;
  for (int i = 0; i < kMaxReqs; i++) {
    Request& r = c->reqs[i];
    if (r.used) continue;
    r = Request{c, true, isSend, false, static_cast<char*>(data), size, isSend ? size : 0, 0, 0};
    c->queue[(c->head + c->count) % kMaxReqs] = i;
    c->count++;
    *request = &r;
    return ncclSuccess;
  }
  return ncclSuccess;  // all slots busy: the caller retries
}

ncclResult_t ftInit(ncclDebugLogger_t logFunction);

ncclResult_t ftDevices(int* ndev) {
  *ndev = 1;
  return ncclSuccess;
}

ncclResult_t ftListen(int dev, void* opaque, void** listenComm) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return sysFail("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ncclResult_t r = sysFail("bind/listen");
    close(fd);
    return r;
  }
  auto* h = static_cast<Handle*>(opaque);
  std::memset(opaque, 0, NCCL_NET_HANDLE_MAXSIZE);
  *h = Handle{kMagic, ntohs(a.sin_port), 0, -1};
  *listenComm = new ListenComm{fd};
  return ncclSuccess;
}

ncclResult_t doConnect(void* opaque, void** sendComm) {
  *sendComm = nullptr;
  auto* h = static_cast<Handle*>(opaque);
  if (h->magic != kMagic) {
    FT_WARN("ferrytest: connect handle has a bad magic");
    return ncclInternalError;
  }
  if (h->stage == 0) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return sysFail("socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(h->port);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
      ncclResult_t r = sysFail("connect");
      close(fd);
      return r;
    }
    h->fd = fd;
    h->stage = 1;
    return ncclSuccess;  // report "not yet" at least once, as real plugins do
  }
  pollfd p{h->fd, POLLOUT, 0};
  if (poll(&p, 1, 0) == 0) return ncclSuccess;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    errno = err ? err : errno;
    close(h->fd);
    return sysFail("connect completion");
  }
  Comm* c = newComm(h->fd);
  if (c == nullptr) return ncclSystemError;
  h->stage = 2;
  *sendComm = c;
  return ncclSuccess;
}

ncclResult_t doAccept(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  int fd = accept4(static_cast<ListenComm*>(listenComm)->fd, nullptr, nullptr,
                   SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? ncclSuccess : sysFail("accept");
  Comm* c = newComm(fd);
  if (c == nullptr) return ncclSystemError;
  *recvComm = c;
  return ncclSuccess;
}

ncclResult_t ftDeregMr(void*, void*) { return ncclSuccess; }

ncclResult_t ftIflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;  // host memory: nothing to flush
  return ncclSuccess;
}

ncclResult_t ftTest(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  *done = 0;
  if (!progress(r->comm)) return ncclSystemError;
  if (!r->done) return ncclSuccess;
  *done = 1;
  if (sizes) *sizes = static_cast<int>(r->size);
  r->used = false;
  return ncclSuccess;
}

std::atomic<int> gInflightCloses{0};

bool strictClose() {
  const char* e = getenv("FERRYTEST_STRICT_CLOSE");
  return e && e[0] == '1';
}

ncclResult_t closeComm(void* comm) {
  Comm* c = static_cast<Comm*>(comm);
  int inFlight = 0;
  if (c)
    for (const Request& r : c->reqs) inFlight += r.used;
  if (inFlight > 0) {
    gInflightCloses++;
    FT_WARN("ferrytest: closing a comm with %d requests in flight", inFlight);
    if (strictClose()) {
      fprintf(stderr, "ferrytest: FATAL: closing a comm with %d requests in flight (pid %d)\n",
              inFlight, static_cast<int>(getpid()));
      abort();
    }
  }
  if (c) close(c->fd);
  delete c;
  return ncclSuccess;
}

ncclResult_t ftCloseListen(void* comm) {
  auto* l = static_cast<ListenComm*>(comm);
  if (l) close(l->fd);
  delete l;
  return ncclSuccess;
}

// ---- version-specific signatures

#if FERRYTEST_NET_VERSION == 6
#define FT_SYMBOL ncclNetPlugin_v6
using NetT = ncclNet_v6_t;
using PropsT = ncclNetProperties_v6_t;
using RegSize = int;
ncclResult_t ftConnect(int, void* h, void** sc) { return doConnect(h, sc); }
ncclResult_t ftAccept(void* l, void** rc) { return doAccept(l, rc); }
#elif FERRYTEST_NET_VERSION == 8
#define FT_SYMBOL ncclNetPlugin_v8
using NetT = ncclNet_v8_t;
using PropsT = ncclNetProperties_v8_t;
using RegSize = size_t;
ncclResult_t ftConnect(int, void* h, void** sc, ncclNetDeviceHandle_v8_t**) { return doConnect(h, sc); }
ncclResult_t ftAccept(void* l, void** rc, ncclNetDeviceHandle_v8_t**) { return doAccept(l, rc); }
#else
#error "FERRYTEST_NET_VERSION must be 6 or 8"
#endif

ncclResult_t ftGetProperties(int dev, PropsT* props) {
  if (dev != 0) return ncclInvalidArgument;
  *props = PropsT{};
  props->name = const_cast<char*>("lo");
  props->pciPath = nullptr;
  props->guid = 0x6674;
  props->ptrSupport = NCCL_PTR_HOST;
  props->speed = 10000;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 1024;
  props->maxRecvs = 1;
  return ncclSuccess;
}

ncclResult_t ftRegMr(void*, void*, RegSize, int, void** mhandle) {
  *mhandle = &gMrToken;
  return ncclSuccess;
}
ncclResult_t ftIsend(void* c, void* data, int size, int, void*, void** request) {
  return post(c, true, data, static_cast<size_t>(size), request);
}
ncclResult_t ftIrecv(void* c, int n, void** data, int* sizes, int*, void**, void** request) {
  if (n != 1) {
    FT_WARN("ferrytest: irecv of %d buffers (maxRecvs is 1)", n);
    return ncclInvalidArgument;
  }
  return post(c, false, data[0], static_cast<size_t>(sizes[0]), request);
}

NetT fullTable() {
  NetT t{};
  t.name = "FerryTest";
  t.init = ftInit;
  t.devices = ftDevices;
  t.getProperties = ftGetProperties;
  t.listen = ftListen;
  t.connect = ftConnect;
  t.accept = ftAccept;
  t.regMr = ftRegMr;
  t.regMrDmaBuf = nullptr;
  t.deregMr = ftDeregMr;
  t.isend = ftIsend;
  t.irecv = ftIrecv;
  t.iflush = ftIflush;
  t.test = ftTest;
  t.closeSend = closeComm;
  t.closeRecv = closeComm;
  t.closeListen = ftCloseListen;
  return t;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) NetT FT_SYMBOL = {.name = "FerryTest", .init = ftInit};
// How many comms were closed with requests in flight in this process.
__attribute__((visibility("default"))) int ferrytestInflightCloses() { return gInflightCloses.load(); }
}

namespace {
ncclResult_t ftInit(ncclDebugLogger_t logFunction) {
  gLog = logFunction;
  FT_SYMBOL = fullTable();
  return ncclSuccess;
}
}  // namespace
