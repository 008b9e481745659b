// ferry_net_bw: the same streaming benchmark as fi_bw (bw_common.h), through
// Ferry's built-in Socket network called as NCCL calls a net plugin: its
// ncclNet_v11 table (listen/connect/accept, regMr, isend/irecv/test). No
// communicator, proxy or collective is involved, so the comparison with
// fi_bw is the network alone.
//
// Each side listens and connects to the other (the 128-byte handles cross
// the out-of-band socket), so there is a send comm and a receive comm per
// side, as NCCL has per peer and channel. uni uses the client's send comm
// only. Driver options:
//   --dev N     the Socket network's device (default 0); which interfaces are
//               devices is NCCL_SOCKET_IFNAME's business (compare.py sets lo)
//   --test-all  test() every outstanding request on each poll, not only the
//               oldest per direction (NCCL's proxy pattern, the default)
//   --spin      poll without pause (the default waits as Ferry's executor
//               does over this network: core/wait.h's Waiter, which past its
//               spin phase blocks in poll() on the sockets test() noted, as
//               FERRY_WAIT_ON_SOCKETS allows)
// The network's own knobs come from the environment as usual
// (NCCL_SOCKET_NTHREADS, NCCL_NSOCKS_PERTHREAD, FERRY_NET_SOCKET_INLINE_BYTES,
// FERRY_NET_RETRY_MS); the server adopts the listener's layout (the handle).
#include <nccl_net.h>

#include <cstdio>
#include <deque>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/wait.h"
#include "perf/fabric/bw_common.h"
#include "transports/netsocket/socket_net.h"

using namespace ferry::perfbw;

namespace {

void check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) die("%s failed: ncclResult %d", what, static_cast<int>(rc));
}

struct FerryNet final : Transport {
  const ncclNet_v11_t* net = ferry::socketNet();
  void* ctx = nullptr;
  void* listen = nullptr;
  void* sendComm = nullptr;
  void* recvComm = nullptr;
  std::vector<void*> sendMh, recvMh;  // one registration per window buffer
  std::vector<void*> reqs;  // [0, window): sends; [window, 2*window): receives
  std::deque<int> fifo[2];  // outstanding indexes into reqs, posting order: sends, receives
  int window = 0;
  bool testAll = false;
  bool spin = false;
  ferry::Waiter waiter{nullptr, 0, "ferry_net_bw"};

  void afterPoll(bool finished) override {
    if (spin) return;
    if (finished) {
      waiter.progressed();
    } else {
      (void)waiter.idle();  // no deadline, no abort flag: never an error
    }
  }

  ~FerryNet() override {
    for (void* m : sendMh) net->deregMr(sendComm, m);
    for (void* m : recvMh) net->deregMr(recvComm, m);
    if (sendComm) net->closeSend(sendComm);
    if (recvComm) net->closeRecv(recvComm);
    if (listen) net->closeListen(listen);
    if (ctx) net->finalize(ctx);
  }

  bool post(bool send, int slot, char* buf, size_t len) override {
    void* req = nullptr;
    int tag = 0;
    if (send) {
      check(net->isend(sendComm, buf, len, tag, sendMh[slot], nullptr, &req), "isend");
    } else {
      void* data = buf;
      size_t size = len;
      void* mh = recvMh[slot];
      check(net->irecv(recvComm, 1, &data, &size, &tag, &mh, nullptr, &req), "irecv");
    }
    if (!req) return false;
    int k = send ? slot : window + slot;
    reqs[static_cast<size_t>(k)] = req;
    fifo[send ? 0 : 1].push_back(k);
    return true;
  }

  // As NCCL's proxy does: test the oldest request of each direction, and the
  // next one only once that finished (both ends match in posting order).
  // --test-all tests every outstanding request on every poll instead.
  void poll(std::vector<std::pair<bool, int>>* done) override {
    for (int dir = 0; dir < 2; ++dir) {
      std::deque<int>& q = fifo[dir];
      for (size_t i = 0; i < q.size();) {
        int fin = 0, size = 0;
        check(net->test(reqs[static_cast<size_t>(q[i])], &fin, &size), "test");
        if (!fin) {
          if (!testAll) break;
          ++i;
          continue;
        }
        done->emplace_back(dir == 0, q[i] < window ? q[i] : q[i] - window);
        q.erase(q.begin() + static_cast<long>(i));
      }
    }
  }

  void setup(int dev, Oob& oob, double deadline) {
    check(net->init(&ctx, 1, nullptr, nullptr, nullptr), "init");
    int ndev = 0;
    check(net->devices(&ndev), "devices");
    if (dev < 0 || dev >= ndev) die("no Socket device %d (%d devices; see NCCL_SOCKET_IFNAME)", dev, ndev);
    char mine[NCCL_NET_HANDLE_MAXSIZE] = {}, theirs[NCCL_NET_HANDLE_MAXSIZE] = {};
    check(net->listen(ctx, dev, mine, &listen), "listen");
    oob.send(mine, sizeof(mine));
    oob.recv(theirs, sizeof(theirs), deadline);
    while (!sendComm || !recvComm) {
      if (!sendComm) check(net->connect(ctx, dev, theirs, &sendComm, nullptr), "connect");
      if (!recvComm) check(net->accept(listen, &recvComm, nullptr), "accept");
      if (nowSec() > deadline) die("connect/accept timed out");
      if (!sendComm || !recvComm) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
};

int roleMain(Opts o) {
  armTimeout(o.timeoutS, "ferry_net_bw");
  bool server = o.role == Opts::kServer;
  double deadline = nowSec() + o.timeoutS;
  const std::string* d = extraOpt(o, "dev");
  int dev = d ? atoi(d->c_str()) : 0;
  Oob oob = server ? Oob::serve(o.addr, o.port, deadline) : Oob::connect(o.addr, o.port, deadline);
  auto [window, maxBytes] = exchangeShape(o, oob, !server);
  Buffers bufs = allocBuffers(window, maxBytes);
  FerryNet f;
  f.window = window;
  f.testAll = extraOpt(o, "test-all") != nullptr;
  f.spin = extraOpt(o, "spin") != nullptr;
  f.waiter.allowFdWait(!f.spin);
  f.reqs.assign(static_cast<size_t>(2 * window), nullptr);
  f.setup(dev, oob, deadline);
  for (int dir = 0; dir < 2; ++dir) {
    for (char* b : dir ? bufs.recv : bufs.send) {
      void* mh = nullptr;
      check(f.net->regMr(dir ? f.recvComm : f.sendComm, b, bufs.bytes, NCCL_PTR_HOST, &mh), "regMr");
      (dir ? f.recvMh : f.sendMh).push_back(mh);
    }
  }
  auto env = [](const char* n) { const char* v = getenv(n); return std::string(v ? v : "unset"); };
  std::string label = std::string("ferry_net_bw Ferry ncclNet '") + f.net->name + "' dev " + std::to_string(dev) +
                      " NCCL_SOCKET_NTHREADS=" + env("NCCL_SOCKET_NTHREADS") +
                      " NCCL_NSOCKS_PERTHREAD=" + env("NCCL_NSOCKS_PERTHREAD") +
                      (f.testAll ? " test-all" : " test-oldest") +
                      (f.spin ? " spin" : " FERRY_WAIT_ON_SOCKETS=" + env("FERRY_WAIT_ON_SOCKETS"));
  return runBench(o, oob, f, bufs, label);
}

}  // namespace

int main(int argc, char** argv) {
  Opts o = parseOpts(argc, argv, "ferry_net_bw", {"dev", "test-all!", "spin!"},
                      "--dev N (default 0), --test-all, --spin");
  if (o.role == Opts::kFork) {
    forkServer(&o, roleMain);
    return reapChild(roleMain(o));
  }
  return roleMain(o);
}
