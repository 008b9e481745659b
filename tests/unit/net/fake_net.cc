#include "fake_net.h"

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <vector>

namespace ferry::fakenet {
namespace {

struct Req {
  bool isSend = false;
  bool done = false;
  bool tested = false;  // test() reported it done
  char* data = nullptr;
  size_t size = 0;      // send: bytes; recv: capacity, then received
  bool tooBig = false;
  std::shared_ptr<struct Channel> ch;
};

struct Channel {
  std::deque<Req*> sends, recvs;  // unmatched, in posting order
  bool closed = false;
  int ends = 2;
  void match() {
    while (!sends.empty() && !recvs.empty()) {
      Req* s = sends.front();
      Req* r = recvs.front();
      sends.pop_front();
      recvs.pop_front();
      if (s->size > r->size) r->tooBig = true;
      else std::memcpy(r->data, s->data, s->size);
      r->size = s->size;
      s->done = r->done = true;
    }
  }
};

struct Comm {
  std::shared_ptr<Channel> ch;
  std::vector<std::unique_ptr<Req>> reqs;
};

struct Listener {
  int id;
  std::deque<std::shared_ptr<Channel>> arrived;
};

Knobs gKnobs;
std::map<int, Listener*> gListeners;
int gNextId = 1;
int gOpen = 0;
int gInflightCloses = 0;

ncclResult_t init(void** ctx, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t,
                  ncclProfilerCallback_t) {
  *ctx = &gKnobs;
  return ncclSuccess;
}
ncclResult_t devices(int* n) { *n = 1; return ncclSuccess; }
ncclResult_t props(int, ncclNetProperties_v11_t* p) {
  std::memset(p, 0, sizeof(*p));
  p->name = const_cast<char*>("fake");
  p->ptrSupport = NCCL_PTR_HOST;
  p->maxRecvs = 1;
  return ncclSuccess;
}
ncclResult_t listen(void*, int, void* handle, void** lc) {
  auto* l = new Listener{gNextId++, {}};
  gListeners[l->id] = l;
  std::memcpy(handle, &l->id, sizeof(int));
  *lc = l;
  return ncclSuccess;
}
ncclResult_t connect(void*, int, void* handle, void** sc, ncclNetDeviceHandle_v11_t**) {
  *sc = nullptr;
  if (gKnobs.nullConnects > 0) { gKnobs.nullConnects--; return ncclSuccess; }
  int id;
  std::memcpy(&id, handle, sizeof(int));
  auto it = gListeners.find(id);
  if (it == gListeners.end()) return ncclSystemError;
  auto* c = new Comm{std::make_shared<Channel>(), {}};
  it->second->arrived.push_back(c->ch);
  *sc = c;
  gOpen++;
  return ncclSuccess;
}
ncclResult_t accept(void* lc, void** rc, ncclNetDeviceHandle_v11_t**) {
  *rc = nullptr;
  auto* l = static_cast<Listener*>(lc);
  if (l->arrived.empty()) return ncclSuccess;
  *rc = new Comm{l->arrived.front(), {}};
  l->arrived.pop_front();
  gOpen++;
  return ncclSuccess;
}
ncclResult_t regMr(void*, void*, size_t, int, void** mh) { *mh = &gKnobs; return ncclSuccess; }
ncclResult_t deregMr(void*, void*) { return ncclSuccess; }
Req* newReq(Comm* c) {
  c->reqs.push_back(std::make_unique<Req>());
  c->reqs.back()->ch = c->ch;
  return c->reqs.back().get();
}
ncclResult_t isend(void* sc, void* data, size_t size, int, void*, void*, void** req) {
  *req = nullptr;
  if (gKnobs.nullIsends > 0) { gKnobs.nullIsends--; return ncclSuccess; }
  auto* c = static_cast<Comm*>(sc);
  if (c->ch->closed) return ncclRemoteError;
  Req* r = newReq(c);
  r->isSend = true;
  r->data = static_cast<char*>(data);
  r->size = size;
  c->ch->sends.push_back(r);
  c->ch->match();
  *req = r;
  return ncclSuccess;
}
ncclResult_t irecv(void* rc, int n, void** data, size_t* sizes, int*, void**, void**, void** req) {
  *req = nullptr;
  if (n != 1) return ncclInternalError;
  if (gKnobs.nullIrecvs > 0) { gKnobs.nullIrecvs--; return ncclSuccess; }
  auto* c = static_cast<Comm*>(rc);
  Req* r = newReq(c);
  r->data = static_cast<char*>(data[0]);
  r->size = sizes[0];
  c->ch->recvs.push_back(r);
  c->ch->match();
  *req = r;
  return ncclSuccess;
}
ncclResult_t test(void* req, int* done, int* size) {
  auto* r = static_cast<Req*>(req);
  if (gKnobs.failTests) return ncclRemoteError;
  if (r->tooBig) return ncclInternalError;
  if (!r->done && r->ch->closed) return ncclRemoteError;  // the peer went away
  *done = r->done;
  r->tested = r->done;
  if (r->done && size) *size = static_cast<int>(r->size);
  return ncclSuccess;
}
ncclResult_t closeComm(void* c) {
  auto* comm = static_cast<Comm*>(c);
  for (auto& r : comm->reqs)
    if (!r->tested) {
      gInflightCloses++;
      break;
    }
  comm->ch->closed = true;
  delete comm;
  gOpen--;
  return ncclSuccess;
}
ncclResult_t closeListen(void* lc) {
  auto* l = static_cast<Listener*>(lc);
  gListeners.erase(l->id);
  delete l;
  return ncclSuccess;
}
ncclResult_t finalize(void*) { return ncclSuccess; }

const ncclNet_v11_t kNet = {
    "Fake", init, devices, props, listen, connect, accept, regMr, nullptr, deregMr, isend, irecv,
    nullptr, test, closeComm, closeComm, closeListen, nullptr, nullptr, nullptr, finalize, nullptr};

}  // namespace

Knobs& knobs() { return gKnobs; }
const ncclNet_v11_t* net() { return &kNet; }
int openComms() { return gOpen; }
int inflightCloses() { return gInflightCloses; }
void resetInflightCloses() { gInflightCloses = 0; }

}  // namespace ferry::fakenet
