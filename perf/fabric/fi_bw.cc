// fi_bw: streaming bandwidth between two endpoints with libfabric directly,
// the baseline for Ferry's built-in Socket network (ferry_net_bw moves the
// same bytes through it; compare.py runs both). Harness, options and output:
// bw_common.h. Driver options:
//   --prov NAME   libfabric provider (default tcp; sockets also works)
//   --ep msg|rdm  endpoint type (default msg: the tcp provider's native
//                 connected endpoint; rdm is tcp;ofi_rxm, what NCCL's
//                 libfabric plugins open)
// msg: the server listens on --port + 1 (passive endpoint, connection
// events on an event queue). rdm: the server's endpoint is bound to
// --port + 1 and the client's address reaches it out of band.
// Completions are read from one CQ (FI_CQ_FORMAT_CONTEXT), busy-polled by
// the harness; FI_MR_LOCAL providers get registered buffers.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "perf/fabric/bw_common.h"

using namespace ferry::perfbw;

namespace {

constexpr uint32_t kFiVersion = FI_VERSION(1, 17);

void check(int rc, const char* what) {
  if (rc) die("%s: %s (%d)", what, fi_strerror(-rc), rc);
}

struct Fabric final : Transport {
  bool rdm = false;
  fi_info* info = nullptr;    // what the endpoint was opened with
  fi_info* hints = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_eq* eq = nullptr;
  fid_pep* pep = nullptr;
  fid_ep* ep = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  std::vector<fid_mr*> mrs;
  std::vector<void*> sendDesc, recvDesc;
  std::vector<fi_context2> ctx;  // [0, window): sends; [window, 2*window): receives
  int window = 0;

  ~Fabric() override {
    for (fid_mr* m : mrs) fi_close(&m->fid);
    if (ep) fi_close(&ep->fid);
    if (pep) fi_close(&pep->fid);
    if (av) fi_close(&av->fid);
    if (cq) fi_close(&cq->fid);
    if (eq) fi_close(&eq->fid);
    if (domain) fi_close(&domain->fid);
    if (fabric) fi_close(&fabric->fid);
    if (info) fi_freeinfo(info);
    if (hints) fi_freeinfo(hints);
  }

  bool post(bool send, int slot, char* buf, size_t len) override {
    fi_context2* c = &ctx[static_cast<size_t>(send ? slot : window + slot)];
    ssize_t rc = send ? fi_send(ep, buf, len, sendDesc[slot], peer, c)
                      : fi_recv(ep, buf, len, recvDesc[slot], rdm ? peer : FI_ADDR_UNSPEC, c);
    if (rc == -FI_EAGAIN) return false;
    if (rc) die("fi_%s: %s", send ? "send" : "recv", fi_strerror(static_cast<int>(-rc)));
    return true;
  }

  void poll(std::vector<std::pair<bool, int>>* done) override {
    fi_cq_entry e[16];
    ssize_t n = fi_cq_read(cq, e, 16);
    if (n == -FI_EAGAIN) return;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(cq, &err, 0);
      die("completion error: %s (prov: %s)", fi_strerror(err.err),
          fi_cq_strerror(cq, err.prov_errno, err.err_data, nullptr, 0));
    }
    if (n < 0) die("fi_cq_read: %s", fi_strerror(static_cast<int>(-n)));
    for (ssize_t i = 0; i < n; ++i) {
      long k = static_cast<fi_context2*>(e[i].op_context) - ctx.data();
      if (k < 0 || k >= 2 * window) die("completion with an unknown context");
      done->emplace_back(k < window, static_cast<int>(k < window ? k : k - window));
    }
  }

  void makeHints(const std::string& prov) {
    hints = fi_allocinfo();
    hints->ep_attr->type = rdm ? FI_EP_RDM : FI_EP_MSG;
    hints->caps = FI_MSG;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->fabric_attr->prov_name = strdup(prov.c_str());
    hints->addr_format = FI_SOCKADDR_IN;
  }

  void openCq() {
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_CONTEXT;
    ca.wait_obj = FI_WAIT_NONE;
    ca.size = static_cast<size_t>(4 * window + 16);
    check(fi_cq_open(domain, &ca, &cq, nullptr), "fi_cq_open");
  }

  void waitEvent(uint32_t want, fi_eq_cm_entry* entry, double deadline) {
    for (;;) {
      uint32_t ev = 0;
      int ms = static_cast<int>((deadline - nowSec()) * 1000);
      if (ms <= 0) die("timed out waiting for a connection event");
      ssize_t rc = fi_eq_sread(eq, &ev, entry, sizeof(*entry), std::min(ms, 200), 0);
      if (rc == -FI_EAGAIN || rc == -FI_ETIMEDOUT) continue;
      if (rc == -FI_EAVAIL) {
        fi_eq_err_entry err{};
        fi_eq_readerr(eq, &err, 0);
        die("connection error: %s", fi_strerror(err.err));
      }
      if (rc < 0) die("fi_eq_sread: %s", fi_strerror(static_cast<int>(-rc)));
      if (ev != want) die("unexpected connection event %u (wanted %u)", ev, want);
      return;
    }
  }

  void registerBuffers(const Buffers& b) {
    sendDesc.assign(b.send.size(), nullptr);
    recvDesc.assign(b.recv.size(), nullptr);
    if (!(info->domain_attr->mr_mode & FI_MR_LOCAL)) return;
    for (int dir = 0; dir < 2; ++dir) {
      const std::vector<char*>& bufs = dir ? b.recv : b.send;
      for (size_t i = 0; i < bufs.size(); ++i) {
        fid_mr* mr = nullptr;
        check(fi_mr_reg(domain, bufs[i], b.bytes, dir ? FI_RECV : FI_SEND, 0, mrs.size(), 0, &mr, nullptr),
              "fi_mr_reg");
        mrs.push_back(mr);
        (dir ? recvDesc : sendDesc)[i] = fi_mr_desc(mr);
      }
    }
  }

  // Connected endpoints: CM through the provider, port + 1.
  void setupMsg(const Opts& o, bool server, Oob& oob, double deadline) {
    std::string svc = std::to_string(o.port + 1);
    fi_info* fi = nullptr;
    int rc = server ? fi_getinfo(kFiVersion, o.addr.empty() ? nullptr : o.addr.c_str(), svc.c_str(), FI_SOURCE,
                                 hints, &fi)
                    : fi_getinfo(kFiVersion, o.addr.c_str(), svc.c_str(), 0, hints, &fi);
    check(rc, "fi_getinfo");
    check(fi_fabric(fi->fabric_attr, &fabric, nullptr), "fi_fabric");
    fi_eq_attr ea{};
    ea.wait_obj = FI_WAIT_UNSPEC;
    check(fi_eq_open(fabric, &ea, &eq, nullptr), "fi_eq_open");
    fi_eq_cm_entry entry{};
    if (server) {
      check(fi_passive_ep(fabric, fi, &pep, nullptr), "fi_passive_ep");
      check(fi_pep_bind(pep, &eq->fid, 0), "fi_pep_bind");
      check(fi_listen(pep), "fi_listen");
      fi_freeinfo(fi);
      oob.barrier(deadline);  // listening: the client may connect now
      waitEvent(FI_CONNREQ, &entry, deadline);
      info = entry.info;
    } else {
      info = fi;
      oob.barrier(deadline);
    }
    check(fi_domain(fabric, info, &domain, nullptr), "fi_domain");
    check(fi_endpoint(domain, info, &ep, nullptr), "fi_endpoint");
    openCq();
    check(fi_ep_bind(ep, &eq->fid, 0), "fi_ep_bind(eq)");
    check(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    check(fi_enable(ep), "fi_enable");
    if (server) check(fi_accept(ep, nullptr, 0), "fi_accept");
    else check(fi_connect(ep, info->dest_addr, nullptr, 0), "fi_connect");
    waitEvent(FI_CONNECTED, &entry, deadline);
  }

  // Reliable datagrams: the server's address is --port + 1, the client's
  // goes to the server out of band.
  void setupRdm(const Opts& o, bool server, Oob& oob, double deadline) {
    std::string svc = std::to_string(o.port + 1);
    int rc = server ? fi_getinfo(kFiVersion, o.addr.empty() ? nullptr : o.addr.c_str(), svc.c_str(), FI_SOURCE,
                                 hints, &info)
                    : fi_getinfo(kFiVersion, o.addr.c_str(), svc.c_str(), 0, hints, &info);
    check(rc, "fi_getinfo");
    check(fi_fabric(info->fabric_attr, &fabric, nullptr), "fi_fabric");
    check(fi_domain(fabric, info, &domain, nullptr), "fi_domain");
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    check(fi_av_open(domain, &aa, &av, nullptr), "fi_av_open");
    check(fi_endpoint(domain, info, &ep, nullptr), "fi_endpoint");
    openCq();
    check(fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind(av)");
    check(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    check(fi_enable(ep), "fi_enable");
    char name[256];
    size_t len = sizeof(name);
    if (server) {
      auto n = oob.recvv<uint32_t>(deadline);
      if (n > sizeof(name)) die("peer address too long");
      oob.recv(name, n, deadline);
      if (fi_av_insert(av, name, 1, &peer, 0, nullptr) != 1) die("fi_av_insert (client)");
    } else {
      check(fi_getname(&ep->fid, name, &len), "fi_getname");
      if (fi_av_insert(av, info->dest_addr, 1, &peer, 0, nullptr) != 1) die("fi_av_insert (server)");
      oob.sendv(static_cast<uint32_t>(len));
      oob.send(name, len);
    }
    oob.barrier(deadline);
  }
};

int roleMain(Opts o) {
  armTimeout(o.timeoutS, "fi_bw");
  bool server = o.role == Opts::kServer;
  double deadline = nowSec() + o.timeoutS;
  const std::string* p = extraOpt(o, "prov");
  const std::string* e = extraOpt(o, "ep");
  std::string prov = p ? *p : "tcp";
  std::string ept = e ? *e : "msg";
  if (ept != "msg" && ept != "rdm") die("--ep must be msg or rdm");
  Oob oob = server ? Oob::serve(o.addr, o.port, deadline) : Oob::connect(o.addr, o.port, deadline);
  auto [window, maxBytes] = exchangeShape(o, oob, !server);
  Buffers bufs = allocBuffers(window, maxBytes);
  Fabric f;
  f.rdm = ept == "rdm";
  f.window = window;
  f.ctx.resize(static_cast<size_t>(2 * window));
  f.makeHints(prov);
  if (f.rdm) f.setupRdm(o, server, oob, deadline);
  else f.setupMsg(o, server, oob, deadline);
  f.registerBuffers(bufs);
  std::string label = "fi_bw libfabric " + std::string(fi_tostr(&f.info->fabric_attr->api_version, FI_TYPE_VERSION)) +
                      " provider " + f.info->fabric_attr->prov_name + " ep " + ept;
  return runBench(o, oob, f, bufs, label);
}

}  // namespace

int main(int argc, char** argv) {
  Opts o = parseOpts(argc, argv, "fi_bw", {"prov", "ep"}, "--prov tcp|sockets (default tcp), --ep msg|rdm (default msg)");
  if (o.role == Opts::kFork) {
    forkServer(&o, roleMain);
    return reapChild(roleMain(o));
  }
  return roleMain(o);
}
