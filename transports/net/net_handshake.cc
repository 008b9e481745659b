// NetTransport's pair handshake (see net_transport.h): connect to the
// peer's handle and send a hello; accept, read hellos, connect back.
#include <string>

#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"
#include "transports/net/net_connection.h"
#include "transports/net/net_transport.h"

namespace ferry::net {

Status NetTransport::check(ncclResult_t r, const char* call, const std::string& where) {
  Status st = pluginStatus(r, call, where);
  if (!st.isOk()) FERRY_WARN("%s", st.message().c_str());
  return st;
}

NetTransport::Pair& NetTransport::pairFor(const CommContext& ctx, int peer) {
  std::unique_ptr<Pair>& p = pairs_[peer];
  if (!p) {
    p = std::make_unique<Pair>();
    p->out = Hello{ctx.commHash, ctx.rank, kHelloMagic, ctx.secret};
  }
  return *p;
}

Status NetTransport::pump(const CommContext& ctx, bool* moved) {
  FERRY_TRY(acceptNew(moved));
  FERRY_TRY(readHellos(ctx, moved));
  for (auto& [peer, p] : pairs_)
    if (p) FERRY_TRY(advancePair(ctx, peer, *p, moved));
  return Status::ok();
}

Status NetTransport::acceptNew(bool* moved) {
  for (void* listenComm : listenComms_) {
    for (;;) {
      void* rc = nullptr;
      ncclNetDeviceHandle_v11_t* noOffload = nullptr;
      FERRY_TRY(check(net_.net->accept(listenComm, &rc, &noOffload), "accept", "the listener"));
      if (!rc) break;
      auto in = std::make_unique<Incoming>();
      in->recvComm = rc;
      incoming_.push_back(std::move(in));
      *moved = true;
    }
  }
  return Status::ok();
}

// Post a receive for each new connection's hello; file the connection under
// the rank it names once the hello is in.
Status NetTransport::readHellos(const CommContext& ctx, bool* moved) {
  const ncclNet_v11_t* n = net_.net;
  for (size_t i = 0; i < incoming_.size();) {
    Incoming& in = *incoming_[i];
    if (!in.mh) FERRY_TRY(check(n->regMr(in.recvComm, &in.in, sizeof(Hello), NCCL_PTR_HOST, &in.mh), "regMr", "hello"));
    int done = 0;
    if (!in.req) {
      void* data = &in.in;
      size_t size = sizeof(Hello);
      int tag = 0;
      FERRY_TRY(check(n->irecv(in.recvComm, 1, &data, &size, &tag, &in.mh, nullptr, &in.req), "irecv", "hello"));
    } else {
      int got = 0;
      FERRY_TRY(check(n->test(in.req, &done, &got), "test", "hello"));
      if (done && got != static_cast<int>(sizeof(Hello))) done = -1;
    }
    if (!done) { ++i; continue; }
    *moved = true;
    Hello h;
    Status valid = checkHello(&in.in, done < 0 ? 0 : sizeof(Hello),
                              HelloExpect{ctx.commHash, ctx.secret, ctx.rank, ctx.nranks}, &h);
    if (done < 0) h = in.in;  // named in the log line as before
    n->deregMr(in.recvComm, in.mh);
    void* rc = in.recvComm;
    incoming_.erase(incoming_.begin() + static_cast<long>(i));
    if (!valid.isOk()) {
      FERRY_WARN("net: refused a connection with a bad hello (rank %d, magic %#x)", h.rank, h.magic);
      n->closeRecv(rc);
      continue;
    }
    Pair& p = pairFor(ctx, h.rank);  // a pair the peer started: we connect back
    if (p.recvComm) {
      // Only this pair is broken; a connect() for another peer must not fail.
      FERRY_WARN("net: rank %d connected twice; the second connection is closed", h.rank);
      n->closeRecv(rc);
      continue;
    }
    p.recvComm = rc;
  }
  return Status::ok();
}

Status NetTransport::advancePair(const CommContext& ctx, int peer, Pair& p, bool* moved) {
  const ncclNet_v11_t* n = net_.net;
  std::string where = std::string(n->name) + " rank " + std::to_string(peer);
  if (!p.sendComm) {
    ncclNetDeviceHandle_v11_t* noOffload = nullptr;
    // To the peer's home device, from ours or (PXN) from the peer's rail
    // (net_transport.h). The same handle buffer on every retry: plugins may
    // keep their progress in it.
    Listeners& theirs = handles_[peer];
    char* handle = theirs.handle[theirs.home];
    FERRY_TRY(check(n->connect(net_.ctx, sendDevice(peer), handle, &p.sendComm, &noOffload), "connect", where));
    if (!p.sendComm) return Status::ok();
    *moved = true;
  }
  if (p.helloSent) return Status::ok();
  if (!p.outMh) FERRY_TRY(check(n->regMr(p.sendComm, &p.out, sizeof(Hello), NCCL_PTR_HOST, &p.outMh), "regMr", where));
  if (!p.outReq) {
    FERRY_TRY(check(n->isend(p.sendComm, &p.out, sizeof(Hello), 0, p.outMh, nullptr, &p.outReq), "isend", where));
    if (!p.outReq) return Status::ok();
  }
  int done = 0;
  FERRY_TRY(check(n->test(p.outReq, &done, nullptr), "test", where));
  if (!done) return Status::ok();
  n->deregMr(p.sendComm, p.outMh);
  p.outMh = p.outReq = nullptr;
  p.helloSent = true;
  *moved = true;
  return Status::ok();
}

}  // namespace ferry::net

namespace ferry::net {

// Hello requests still posted at teardown (a pair the peer started and we
// never used, a hello that arrived late): test them to completion, bounded by
// FERRY_TIMEOUT_MS without progress, so that no comm closes with one in
// flight. An error (the peer is gone) ends a request too.
void NetTransport::reapHellos() {
  const ncclNet_v11_t* n = net_.net;
  Waiter w(nullptr, config::getInt(config::Param::kTimeoutMs), "closing the network");
  for (;;) {
    int left = 0;
    bool moved = false;
    auto reap = [&](void*& req) {
      if (!req) return;
      int done = 0, size = 0;
      if (n->test(req, &done, &size) != ncclSuccess || done) {
        req = nullptr;
        moved = true;
      } else {
        left++;
      }
    };
    for (auto& in : incoming_) reap(in->req);
    for (auto& [peer, p] : pairs_) reap(p->outReq);
    if (left == 0) return;
    if (moved) {
      w.progressed();
    } else if (!w.idle().isOk()) {
      FERRY_WARN("net: closing the network with %d connection hellos in flight", left);
      return;
    }
  }
}

}  // namespace ferry::net
