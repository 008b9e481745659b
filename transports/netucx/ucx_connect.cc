// The connecting side of the UCX network: a non-blocking handshake over a
// TCP side channel (see ucx_internal.h), then a UCP endpoint to the receiver.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "net/socket.h"
#include "transports/netucx/ucx_internal.h"

namespace ferry::ucx {

namespace {

void epError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* c = static_cast<Comm*>(arg);
  c->epFailed = true;
  c->ctx->peerFailed = true;
  c->epStatus = status;
}

// A half-made endpoint: force it closed (context lock held). Freeing a
// request still in flight is allowed (UCX releases it on completion); the
// close is waited for, briefly, because the endpoint's error callback
// points at c.
void abandonEndpoint(Comm* c) {
  if (c->pingReq) ucp().ucp_request_free(c->pingReq);
  c->pingReq = nullptr;
  if (!c->ep) return;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t sp = ucp().ucp_ep_close_nbx(c->ep, &p);
  c->ep = nullptr;
  if (!UCS_PTR_IS_PTR(sp)) return;
  for (int64_t end = nowMs() + 200; nowMs() < end;) {
    if (ucp().ucp_request_check_status(sp) != UCS_INPROGRESS) break;
    progress(c->ctx);
  }
  ucp().ucp_request_free(sp);
}

// Give up a connect in progress. The caller must not hold the context lock.
ncclResult_t failConnect(Handle* h) {
  Comm* c = h->inProgress;
  if (c) {
    std::lock_guard<std::mutex> lock(c->ctx->mu);
    if (c->ep) c->ctx->peerFailed = true;  // UCX may hold wireup state for it
    abandonEndpoint(c);
  }
  dropComm(c);
  h->inProgress = nullptr;
  h->stage = 0;
  return ncclRemoteError;
}

// Stage 0 → 1: start a non-blocking TCP connect to the listener.
ncclResult_t startConnect(Context* ctx, Handle* h) {
  SockAddr to = SockAddr::unpack(h->addr, sizeof(h->addr));
  if (!to.valid()) {
    UCX_WARN("connect: the handle carries no valid address");
    return ncclInvalidArgument;
  }
  int fd = ::socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    UCX_WARN("connect: socket() failed: %s", strerror(errno));
    return ncclSystemError;
  }
  auto* c = new Comm;
  c->ctx = ctx;
  c->isSend = true;
  c->ch.fd = fd;
  h->inProgress = c;
  if (::connect(fd, to.sa(), to.length()) != 0 && errno != EINPROGRESS) {
    UCX_WARN("connect to %s failed: %s", to.toString().c_str(), strerror(errno));
    return failConnect(h);
  }
  h->stage = 1;
  return ncclSuccess;
}

// Stage 1 → 2 once the TCP connection is up: send our hello.
ncclResult_t finishTcpConnect(Handle* h, bool* ready) {
  Comm* c = h->inProgress;
  pollfd p{c->ch.fd, POLLOUT, 0};
  *ready = false;
  if (::poll(&p, 1, 0) <= 0) return ncclSuccess;
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(c->ch.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    SockAddr to = SockAddr::unpack(h->addr, sizeof(h->addr));
    UCX_WARN("connect to %s failed: %s", to.toString().c_str(), strerror(err ? err : errno));
    return failConnect(h);
  }
  (void)setNoDelay(c->ch.fd);
  putHello(&c->ch, 0, {});  // the receiver needs no address: it never sends data
  h->stage = 2;
  *ready = true;
  return ncclSuccess;
}

// Stage 2 → 3: trade hellos, create the endpoint, start the ping.
ncclResult_t exchangeHello(Context* ctx, Handle* h) {
  Comm* c = h->inProgress;
  bool done = false;
  if (c->ch.flush(&done) != ncclSuccess) return failConnect(h);
  if (!done) return ncclSuccess;
  if (c->ch.readHello(&done) != ncclSuccess) return failConnect(h);
  if (!done) return ncclSuccess;
  std::vector<uint8_t> remote;
  if (parseHello(c->ch, &c->tag, &remote) != ncclSuccess || remote.empty()) {
    UCX_WARN("connect: the receiver's hello carries no worker address");
    return failConnect(h);
  }
  ucs_status_ptr_t sp = nullptr;
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    if (createEndpoint(c, remote) == ncclSuccess) {
      // The connection counts as made once UCX has wired it up both ways:
      // a synchronous send completes only when the receiver's ack came back.
      // UCX 1.13 (assertions on) aborts the process if a peer dies while a
      // wireup reply toward it is still queued, which a lazily wired reverse
      // path otherwise risks at the first rendezvous.
      ucp_request_param_t p{};
      sp = ucp().ucp_tag_send_sync_nbx(c->ep, nullptr, 0, c->tag | kPingTagBit, &p);
      if (UCS_PTR_IS_ERR(sp)) {
        UCX_WARN("connect: handshake ping failed: %s", ucp().ucs_status_string(UCS_PTR_STATUS(sp)));
      }
    }
  }
  if (!c->ep || UCS_PTR_IS_ERR(sp)) return failConnect(h);
  c->pingReq = sp;
  h->stage = 3;
  return ncclSuccess;
}

// Stage 3: *wired once the ping was acknowledged.
ncclResult_t awaitWireup(Comm* c, bool* wired) {
  *wired = false;
  if (c->pingReq) {
    progress(c->ctx);
    ucs_status_t st = ucp().ucp_request_check_status(c->pingReq);
    if (st == UCS_INPROGRESS) {
      if (!c->ch.peerClosed() && !c->epFailed) return ncclSuccess;
      UCX_WARN("connect: the peer went away while the connection was being wired up");
      return ncclRemoteError;
    }
    ucp().ucp_request_free(c->pingReq);
    c->pingReq = nullptr;
    if (st != UCS_OK) {
      UCX_WARN("connect: wiring up the endpoint failed: %s", ucp().ucs_status_string(st));
      return ncclRemoteError;
    }
  }
  *wired = true;
  return ncclSuccess;
}

}  // namespace

ncclResult_t createEndpoint(Comm* comm, const std::vector<uint8_t>& remoteAddr) {
  Context* ctx = comm->ctx;
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(remoteAddr.data());
  ep.err_mode = ctx->noPeerErrMode ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = epError;
  ep.err_handler.arg = comm;
  ucs_status_t st = ucp().ucp_ep_create(ctx->worker, &ep, &comm->ep);
  if (st == UCS_ERR_UNREACHABLE && !ctx->noPeerErrMode) {
    // UCX 1.13's shared-memory transports cannot detect a dead peer, so in
    // PEER mode they are not eligible at all.
    UCX_INFO("no transport with peer-failure detection reaches the peer; endpoints of this "
             "context use UCP_ERR_HANDLING_MODE_NONE (failures are seen on the side channel)");
    ctx->noPeerErrMode = true;
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    st = ucp().ucp_ep_create(ctx->worker, &ep, &comm->ep);
  }
  if (st != UCS_OK) {
    UCX_WARN("ucp_ep_create failed: %s", ucp().ucs_status_string(st));
    comm->ep = nullptr;
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm,
                     ncclNetDeviceHandle_v11_t** sendDevComm) {
  *sendComm = nullptr;
  auto* h = static_cast<Handle*>(handle);
  auto* context = static_cast<Context*>(ctx);
  if (!context || h->magic != kMagic) {
    UCX_WARN("connect: bad context %p or handle (magic 0x%x)", ctx, h->magic);
    return ncclInvalidArgument;
  }
  if (h->stage == 0) {
    ncclResult_t r = startConnect(context, h);
    if (r != ncclSuccess) return r;
  }
  if (h->stage == 1) {
    bool ready = false;
    ncclResult_t r = finishTcpConnect(h, &ready);
    if (r != ncclSuccess || !ready) return r;
  }
  if (h->stage == 2) {
    ncclResult_t r = exchangeHello(context, h);
    if (r != ncclSuccess || h->stage != 3) return r;
  }
  bool wired = false;
  ncclResult_t r;
  {
    std::lock_guard<std::mutex> lock(context->mu);
    r = awaitWireup(h->inProgress, &wired);
  }
  if (r != ncclSuccess) return failConnect(h);
  if (!wired) return ncclSuccess;
  Comm* c = h->inProgress;
  if (h->stage == 3) {
    // Tell the acceptor the endpoint is wired up; it progresses its worker
    // (which our ping needed) until this byte arrives.
    c->ch.out.assign(1, kReadyByte);
    c->ch.sent = 0;
    h->stage = 4;
  }
  bool sent = false;
  if (c->ch.flush(&sent) != ncclSuccess) return failConnect(h);
  if (!sent) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(context->mu);
    context->liveComms++;
  }
  *sendComm = c;
  h->inProgress = nullptr;
  h->stage = 0;
  return ncclSuccess;
}

}  // namespace ferry::ucx
