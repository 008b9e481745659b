// Data path of the UCX network: tagged sends/receives, test, close.
//
// Each connection has a tag unique in the receiver's worker; UCP matches
// messages of one endpoint and tag in posting order, which is exactly the
// "sends and receives match in order" rule of the net API.
#include <sched.h>

#include "transports/netucx/ucx_internal.h"

namespace ferry::ucx {

namespace {

// After the side channel reports the peer gone, data it sent before leaving
// may still be on its way through UCX: give it this long to land.
constexpr int64_t kGraceMs = 1000;
constexpr int64_t kCheckEveryMs = 5;
constexpr int64_t kCloseDeadlineMs = 5000;
// Without UCX error handling (shared memory) sends to a dead peer never end.
constexpr int64_t kCloseFailedDeadlineMs = 200;

void sendDone(void* request, ucs_status_t status, void* user) {
  auto* r = static_cast<Request*>(user);
  r->status = status;
  r->done = true;
}

void recvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* r = static_cast<Request*>(user);
  r->status = status;
  if (status == UCS_OK) r->size = info->length;
  r->done = true;
}

Request* freeSlot(Comm* c) {
  for (Request& r : c->reqs) {
    if (!r.used) return &r;
  }
  return nullptr;
}

void release(Request* r) {
  if (r->ucpReq) ucp().ucp_request_free(r->ucpReq);
  r->ucpReq = nullptr;
  r->used = false;
  r->done = false;
}

void warnGone(Comm* c, const char* why) {
  c->ctx->peerFailed = true;
  if (c->warned) return;
  c->warned = true;
  UCX_WARN("%s connection (tag %lu): peer failed: %s", c->isSend ? "send" : "receive",
           static_cast<unsigned long>(c->tag), why);
}

// An error once the peer is known to be gone (one WARN per connection).
ncclResult_t checkPeer(Comm* c) {
  if (c->epFailed) {
    warnGone(c, ucp().ucs_status_string(c->epStatus));
    return ncclRemoteError;
  }
  int64_t now = nowMs();
  if (!c->peerGone && now - c->lastCheckMs >= kCheckEveryMs) {
    c->lastCheckMs = now;
    if (c->ch.peerClosed()) {
      c->peerGone = true;
      c->peerGoneMs = now;
    }
  }
  if (c->peerGone && now - c->peerGoneMs >= kGraceMs) {
    warnGone(c, "it closed its connection or exited");
    return ncclRemoteError;
  }
  return ncclSuccess;
}

ucp_request_param_t requestParam(Request* r) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                   UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.user_data = r;
  p.memory_type = UCS_MEMORY_TYPE_HOST;  // spares UCX the memory-type lookup
  return p;
}

// Start a request on slot r; sp is what the UCP call returned.
ncclResult_t started(Request* r, ucs_status_ptr_t sp, const char* what) {
  if (sp == nullptr) {
    r->done = true;  // completed in place; the callback will not run
    r->status = UCS_OK;
  } else if (UCS_PTR_IS_ERR(sp)) {
    r->used = false;
    UCX_WARN("%s failed: %s", what, ucp().ucs_status_string(UCS_PTR_STATUS(sp)));
    return ncclRemoteError;
  } else {
    r->ucpReq = sp;
  }
  return ncclSuccess;
}

bool busy(Comm* c, void* closeReq) {
  if (closeReq && ucp().ucp_request_check_status(closeReq) == UCS_INPROGRESS) return true;
  for (Request& r : c->reqs) {
    if (r.used && !r.done && r.ucpReq) return true;
  }
  return false;
}

ncclResult_t closeComm(Comm* c) {
  if (!c) return ncclSuccess;
  Context* ctx = c->ctx;
  std::lock_guard<std::mutex> lock(ctx->mu);
  bool pendingSends = false;
  for (Request& r : c->reqs) {
    if (!r.used || r.done || !r.ucpReq) continue;
    // A receive still posted will never be wanted; sends end with the endpoint.
    if (r.isRecv) ucp().ucp_request_cancel(ctx->worker, r.ucpReq);
    else pendingSends = true;
  }
  void* closeReq = nullptr;
  if (c->ep) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // Flush when healthy so that what was sent reaches the peer.
    bool force = c->epFailed || c->peerGone || pendingSends;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t sp = ucp().ucp_ep_close_nbx(c->ep, &p);
    if (UCS_PTR_IS_PTR(sp)) closeReq = sp;
    c->ep = nullptr;
  }
  bool failed = c->epFailed || c->peerGone;
  int64_t deadline = nowMs() + (failed ? kCloseFailedDeadlineMs : kCloseDeadlineMs);
  while (busy(c, closeReq)) {
    if (nowMs() > deadline) {
      // UCX still owns requests that point into c: leaking is the safe choice.
      if (!failed) {
        UCX_WARN("closing a connection: UCX did not finish its requests within %ld ms; "
                 "leaking them", static_cast<long>(kCloseDeadlineMs));
      }
      ctx->peerFailed = true;  // the worker must outlive those requests
      c->ch.close();
      ctx->liveComms--;
      return ncclSuccess;
    }
    if (ucp().ucp_worker_progress(ctx->worker) == 0) sched_yield();
  }
  if (closeReq) ucp().ucp_request_free(closeReq);
  for (Request& r : c->reqs) {
    if (r.ucpReq) ucp().ucp_request_free(r.ucpReq);
  }
  c->ch.close();
  ctx->liveComms--;
  delete c;
  return ncclSuccess;
}

}  // namespace

ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (type != NCCL_PTR_HOST) {
    UCX_WARN("regMr: memory type %d not supported (host memory only)", type);
    return ncclInternalError;
  }
  // UCX registers host memory on its own when a transport needs it; the
  // handle only has to be non-NULL.
  *mhandle = comm;
  return ncclSuccess;
}

ncclResult_t deregMr(void* comm, void* mhandle) { return ncclSuccess; }

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request) {
  auto* c = static_cast<Comm*>(sendComm);
  *request = nullptr;
  if (size > static_cast<size_t>(MAX_NET_SIZE)) {
    UCX_WARN("isend of %zu bytes exceeds maxP2pBytes %lld", size, MAX_NET_SIZE);
    return ncclInvalidUsage;
  }
  std::lock_guard<std::mutex> lock(c->ctx->mu);
  if (c->epFailed || c->peerGone) return checkPeer(c) == ncclSuccess ? ncclSuccess : ncclRemoteError;
  Request* r = freeSlot(c);
  if (!r) return ncclSuccess;  // 32 in flight: the caller retries
  *r = Request{};
  r->comm = c;
  r->used = true;
  r->size = size;
  ucp_request_param_t p = requestParam(r);
  p.cb.send = sendDone;
  ncclResult_t res = started(r, ucp().ucp_tag_send_nbx(c->ep, data, size, c->tag, &p), "ucp_tag_send_nbx");
  if (res == ncclSuccess) *request = r;
  return res;
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request) {
  auto* c = static_cast<Comm*>(recvComm);
  *request = nullptr;
  if (n != 1) {
    UCX_WARN("irecv with n=%d: this network supports maxRecvs 1", n);
    return ncclInternalError;
  }
  std::lock_guard<std::mutex> lock(c->ctx->mu);
  Request* r = freeSlot(c);
  if (!r) return ncclSuccess;
  *r = Request{};
  r->comm = c;
  r->used = true;
  r->isRecv = true;
  ucp_request_param_t p = requestParam(r);
  // UCX 1.13 leaves recv_info.tag_info's length at 0 when a receive of an
  // unexpected eager message completes in place: always take the callback.
  p.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = recvDone;
  ucs_status_ptr_t sp =
      ucp().ucp_tag_recv_nbx(c->ctx->worker, data[0], sizes[0], c->tag, ~ucp_tag_t(0), &p);
  ncclResult_t res = started(r, sp, "ucp_tag_recv_nbx");
  if (res == ncclSuccess) *request = r;
  return res;
}

ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                    void** request) {
  *request = nullptr;  // host memory: nothing to flush
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  Comm* c = r->comm;
  *done = 0;
  std::lock_guard<std::mutex> lock(c->ctx->mu);
  if (!r->done) progress(c->ctx);
  if (!r->done) return checkPeer(c);
  ucs_status_t st = r->status;
  size_t size = r->size;
  release(r);
  if (st != UCS_OK) {
    if (st == UCS_ERR_MESSAGE_TRUNCATED) {
      UCX_WARN("receive (tag %lu): the message is larger than the posted buffer",
               static_cast<unsigned long>(c->tag));
      return ncclInvalidUsage;
    }
    warnGone(c, ucp().ucs_status_string(st));
    return ncclRemoteError;
  }
  *done = 1;
  if (sizes) sizes[0] = static_cast<int>(size);
  return ncclSuccess;
}

ncclResult_t closeSend(void* sendComm) { return closeComm(static_cast<Comm*>(sendComm)); }
ncclResult_t closeRecv(void* recvComm) { return closeComm(static_cast<Comm*>(recvComm)); }

}  // namespace ferry::ucx
