#include "test_net.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/config.h"
#include "core/log.h"
#include "transports/netsocket/socket_net.h"

namespace ferry::nettest {

const ncclNet_v11_t* net() { return socketNet(); }

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Env::Env(const char* name, std::optional<std::string> value) : name_(name) {
  if (const char* v = getenv(name)) old_ = v;
  if (value) setenv(name, value->c_str(), 1);
  else unsetenv(name);
  config::reload();
  log::reset();
  netsocket::reloadDevices();
}

Env::~Env() {
  if (old_) setenv(name_.c_str(), old_->c_str(), 1);
  else unsetenv(name_.c_str());
  config::reload();
  log::reset();
  netsocket::reloadDevices();
}

bool ipv6LoopbackUsable() {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

Pair::~Pair() {
  if (send) net()->closeSend(send);
  if (recv) net()->closeRecv(recv);
  if (listen) net()->closeListen(listen);
  if (ctxSend) net()->finalize(ctxSend);
  if (ctxRecv) net()->finalize(ctxRecv);
}

std::string connectPair(Pair& p, int64_t timeoutMs) {
  const ncclNet_v11_t* n = net();
  if (n->init(&p.ctxSend, 1, nullptr, nullptr, nullptr) != ncclSuccess) return "init (send)";
  if (n->init(&p.ctxRecv, 2, nullptr, nullptr, nullptr) != ncclSuccess) return "init (recv)";
  if (n->listen(p.ctxRecv, 0, p.handle, &p.listen) != ncclSuccess || !p.listen) return "listen";
  int64_t deadline = nowMs() + timeoutMs;
  while (!p.send || !p.recv) {
    if (!p.send && n->connect(p.ctxSend, 0, p.handle, &p.send, nullptr) != ncclSuccess) return "connect";
    if (!p.recv && n->accept(p.listen, &p.recv, nullptr) != ncclSuccess) return "accept";
    if (nowMs() > deadline) return "connect/accept timed out";
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return "";
}

ncclResult_t waitDone(void* request, int64_t timeoutMs, int* size_out) {
  int64_t deadline = nowMs() + timeoutMs;
  int done = 0;
  int size = -1;
  while (!done) {
    ncclResult_t rc = net()->test(request, &done, &size);
    if (rc != ncclSuccess) return rc;
    if (nowMs() > deadline) return ncclInProgress;
    if (!done) std::this_thread::yield();
  }
  if (size_out) *size_out = size;
  return ncclSuccess;
}

namespace {
ncclResult_t post(bool send, void* comm, void* data, size_t size, int64_t deadline, void** req) {
  *req = nullptr;
  while (!*req) {
    int tag = 0;
    void* mh = nullptr;
    ncclResult_t rc = send ? net()->isend(comm, data, size, 0, nullptr, nullptr, req)
                           : net()->irecv(comm, 1, &data, &size, &tag, &mh, nullptr, req);
    if (rc != ncclSuccess) return rc;
    if (nowMs() > deadline) return ncclInProgress;
  }
  return ncclSuccess;
}
}  // namespace

ncclResult_t sendWait(void* comm, void* data, size_t size, int64_t timeoutMs, int* size_out) {
  void* req;
  ncclResult_t rc = post(true, comm, data, size, nowMs() + timeoutMs, &req);
  return rc != ncclSuccess ? rc : waitDone(req, timeoutMs, size_out);
}

ncclResult_t recvWait(void* comm, void* data, size_t size, int64_t timeoutMs, int* size_out) {
  void* req;
  ncclResult_t rc = post(false, comm, data, size, nowMs() + timeoutMs, &req);
  return rc != ncclSuccess ? rc : waitDone(req, timeoutMs, size_out);
}

std::vector<char> pattern(size_t size, int salt) {
  std::vector<char> v(size);
  uint32_t x = 2463534242u + salt * 7919u;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v[i] = static_cast<char>(x);
  }
  return v;
}

}  // namespace ferry::nettest
