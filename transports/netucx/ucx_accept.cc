// The listening side of the UCX network: listen / accept / closeListen.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "net/socket.h"
#include "transports/netucx/ucx_internal.h"

namespace ferry::ucx {

namespace {

// Drop an accept in progress. The caller must not hold the context lock.
void dropPending(ListenComm* lc) {
  Comm* c = lc->pending;
  lc->pending = nullptr;
  if (!c) return;
  if (c->pingReq) {
    std::lock_guard<std::mutex> lock(lc->ctx->mu);
    ucp().ucp_request_cancel(lc->ctx->worker, c->pingReq);
    ucp().ucp_request_free(c->pingReq);
  }
  dropComm(c);
}

// The connector's one-byte "wired up" notice.
ncclResult_t readReady(Comm* c, bool* ready) {
  uint8_t b = 0;
  ssize_t n = ::recv(c->ch.fd, &b, 1, MSG_DONTWAIT);
  *ready = n == 1 && b == kReadyByte;
  if (n == 1 && b != kReadyByte) {
    UCX_WARN("accept: unexpected handshake byte 0x%x", b);
    return ncclRemoteError;
  }
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    UCX_WARN("accept: the connector went away during wireup (%s)", n == 0 ? "EOF" : strerror(errno));
    return ncclRemoteError;
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) {
  *listenComm = nullptr;
  const std::vector<Device>& devs = devices(nullptr);
  if (!ctx || dev < 0 || dev >= static_cast<int>(devs.size())) {
    UCX_WARN("listen: bad context %p or device %d (%zu devices)", ctx, dev, devs.size());
    return ncclInvalidArgument;
  }
  SockAddr addr = SockAddr::unpack(devs[dev].addr.data(), devs[dev].addr.size());
  auto sock = listenSocket(addr, 64);
  if (!sock.isOk()) {
    UCX_WARN("listen on %s failed: %s", devs[dev].name.c_str(), sock.status().message().c_str());
    return ncclSystemError;
  }
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  auto* h = static_cast<Handle*>(handle);
  h->magic = kMagic;
  sock.value().peer().pack(h->addr);
  auto* lc = new ListenComm;
  lc->ctx = static_cast<Context*>(ctx);
  lc->dev = dev;
  lc->listenFd = sock.value().release();
  *listenComm = lc;
  return ncclSuccess;
}

ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v11_t** recvDevComm) {
  *recvComm = nullptr;
  auto* lc = static_cast<ListenComm*>(listenComm);
  if (!lc->pending) {
    int fd = ::accept4(lc->listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ncclSuccess;
      UCX_WARN("accept failed: %s", strerror(errno));
      return ncclSystemError;
    }
    (void)setNoDelay(fd);
    lc->pending = new Comm;
    lc->pending->ctx = lc->ctx;
    lc->pending->ch.fd = fd;
    lc->replied = false;
  }
  Comm* c = lc->pending;
  bool done = false;
  auto fail = [lc] {
    dropPending(lc);
    return ncclRemoteError;
  };
  if (!lc->replied) {
    if (c->ch.readHello(&done) != ncclSuccess) return fail();
    if (!done) return ncclSuccess;
    std::lock_guard<std::mutex> lock(lc->ctx->mu);
    // Tags are matched worker-wide, so each receive comm gets its own.
    c->tag = lc->ctx->nextTag++;
    ucp_request_param_t p{};
    ucs_status_ptr_t sp =
        ucp().ucp_tag_recv_nbx(lc->ctx->worker, nullptr, 0, c->tag | kPingTagBit, ~ucp_tag_t(0), &p);
    if (UCS_PTR_IS_ERR(sp)) {
      UCX_WARN("accept: posting the handshake ping failed: %s",
               ucp().ucs_status_string(UCS_PTR_STATUS(sp)));
      return ncclSystemError;  // the comm stays pending; closeListen frees it
    }
    c->pingReq = sp;
    putHello(&c->ch, c->tag, lc->ctx->workerAddr);
    lc->replied = true;
  }
  if (c->ch.flush(&done) != ncclSuccess) return fail();
  if (!done) return ncclSuccess;
  bool ready = false;
  ncclResult_t r;
  {
    std::lock_guard<std::mutex> lock(lc->ctx->mu);
    progress(lc->ctx);  // the connector's wireup needs our worker
    r = readReady(c, &ready);
    if (r != ncclSuccess) lc->ctx->peerFailed = true;
    if (r == ncclSuccess && ready) {
      // The ping was matched (the connector saw its ack before sending ready).
      if (c->pingReq) ucp().ucp_request_free(c->pingReq);
      c->pingReq = nullptr;
      lc->ctx->liveComms++;
    }
  }
  if (r != ncclSuccess) return fail();
  if (!ready) return ncclSuccess;
  lc->pending = nullptr;
  *recvComm = c;
  return ncclSuccess;
}

ncclResult_t closeListen(void* listenComm) {
  auto* lc = static_cast<ListenComm*>(listenComm);
  if (!lc) return ncclSuccess;
  if (lc->listenFd >= 0) ::close(lc->listenFd);
  dropPending(lc);
  delete lc;
  return ncclSuccess;
}

}  // namespace ferry::ucx
