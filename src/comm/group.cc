#include "comm/group.h"

#include "algorithms/cost_model.h"

#include <cstring>
#include <thread>
#include <vector>

#include "algorithms/algorithm.h"
#include "comm/p2p_exchange.h"
#include "comm/p2p_plan.h"
#include "comm/registry.h"
#include "comm/device_direct.h"
#include "comm/stream_bridge.h"
#include "comm/symmetric_bind.h"
#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"

namespace ferry {
namespace {

struct PendingInit {
  Comm* comm;
  uint64_t serial;
  ncclUniqueId id;
};

// One communicator's queued work in a group.
struct CommTasks {
  Comm* comm = nullptr;
  uint64_t serial = 0;  // the comm the pointer meant when work was queued
  std::vector<CollTask> colls;
  std::vector<P2pTask> p2ps;
  bool device = false;  // a task is stream-ordered: the lot goes to the bridge
};

// Reused from group to group (cleared, capacity kept): the small-message
// path allocates nothing here.
struct GroupState {
  int depth = 0;
  std::vector<CommTasks> comms;  // [0, used): in order of first use
  size_t used = 0;
  std::vector<PendingInit> inits;
  void clear() {
    for (size_t i = 0; i < used; ++i) {
      comms[i].colls.clear();
      comms[i].p2ps.clear();
      comms[i].device = false;
    }
    used = 0;
    inits.clear();
  }
  CommTasks& of(Comm* c) {
    for (size_t i = 0; i < used; ++i)
      if (comms[i].comm == c) return comms[i];
    if (used == comms.size()) comms.emplace_back();
    CommTasks& t = comms[used++];
    t.comm = c;
    t.serial = c->serial();
    return t;
  }
};

thread_local GroupState tGroup;
// Every entry point reads the thread's group once: each access to a
// thread_local of a shared library is a call (TLS descriptors), and
// groupEnd made eight of them per 8 B Send/Recv.
inline GroupState& group() { return tGroup; }

// One executor run: a cached collective executor with this call's buffers,
// or a group's point-to-point executor (owned by the CommWork).
struct Run {
  Executor* exec;
  void* input;
  void* output;
  ReduceSpec reduce;
  const char* name;
  OpInfo info;
  PeerMemory* peers = nullptr;  // symmetric windows (symmetric_bind.h)
  AlltoAllvCall* alltoallv = nullptr;  // builds `exec` when the run starts
  IoGate* gate = nullptr;              // CollTask::gate
};

// The call's operation check, numbered in the order collectives run.
OpInfo collInfo(Comm* c, const CollTask& t) {
  OpInfo i = t.info;
  i.collSeq = c->nextCollSeq();
  i.self = c->rank();
  return i;
}

struct CommWork {
  Comm* comm;
  std::vector<Run> runs;
  Status result;
  std::vector<std::unique_ptr<mem::WindowBinding>> bindings;
  std::shared_ptr<AlltoAllvCall> exchange;  // the group's Send/Recv as one (p2p_exchange.h)
  std::shared_ptr<char[]> sendCopy;          // in-place Send/Recv: what the sends read
  // Ready for the next group: everything released, the runs' memory kept.
  void reset(Comm* c) {
    comm = c;
    runs.clear();
    result = Status();
    bindings.clear();
    exchange.reset();
    sendCopy.reset();
  }
};

Result<Choice> choose(Comm* c, const CollArgs& args) {
  return chooseAlgorithm(args, c->view(), c->algoFilter(), c->externalTuner());
}

Result<Executor*> collExecutor(Comm* c, const CollArgs& args) {
  if (Executor* e = c->plans().find(args)) return e;
  FERRY_ASSIGN(Choice ch, choose(c, args));
  // Once per plan (call shape): the cost table and what runs, so tests and
  // users can see what the model, NCCL_ALGO or a tuner plugin chose.
  FERRY_INFO(log::kTuning, "%s count %zu elemSize %zu: algorithm %s (%s, %.1f us); costs: %s",
             collName(args.kind), args.count, args.elemSize, ch.algo->name, ch.by, ch.predictedUs,
             costTableText(ch).c_str());
  Schedule s = ch.algo->build(args, c->view());
  std::vector<void*> bufs = {nullptr, nullptr};
  return c->plans().add(args, std::make_unique<Executor>(std::move(s), std::move(bufs),
                                                         args.elemSize, ReduceSpec{},
                                                         c->execOptions()));
}

// A collective's run; on symmetric windows its binding goes to *binding,
// which must live as long as the run.
Result<Run> collRun(Comm* c, const CollTask& t, std::unique_ptr<mem::WindowBinding>* binding) {
  OpInfo info = collInfo(c, t);
  *binding = bindWindows(c, t, info);
  CollArgs args = t.args;
  args.symmetric = *binding != nullptr;
  FERRY_ASSIGN(Executor * e, collExecutor(c, args));
  Run r{e, const_cast<void*>(t.sendbuff), t.recvbuff, t.reduce, collName(args.kind), info,
        binding->get()};
  r.gate = t.gate;
  return r;
}

// ferryAlltoAllv's two runs (alltoallv_call.h): the host's count swap,
// then the exchange itself, built once the counts are in.
void alltoallvRuns(CommWork* w, const CollTask& t) {
  Comm* c = w->comm;
  AlltoAllvCall* v = t.alltoallv.get();
  w->runs.push_back(Run{v->countSwap(), nullptr, nullptr, ReduceSpec{}, "AlltoAllv",
                        collInfo(c, t), nullptr});
  Run x{nullptr, nullptr, nullptr, ReduceSpec{}, "AlltoAllv", collInfo(c, t), nullptr};
  x.alltoallv = v;
  w->runs.push_back(x);
}

// A group's Send/Recv as one executor run (p2p_plan.h).
Status p2pRun(CommWork* w, const std::vector<P2pTask>& p2ps) {
  Comm* c = w->comm;
  Executor* e = repeatP2p(c, p2ps, &w->sendCopy);
  if (!e) {
    FERRY_ASSIGN(e, p2pExecutor(c, p2ps, &w->sendCopy));
  }
  w->runs.push_back(Run{e, nullptr, nullptr, ReduceSpec{}, "Send/Recv", p2pInfo(c), nullptr});
  return Status::ok();
}

Status buildWork(CommWork* w, const std::vector<CollTask>& colls, const std::vector<P2pTask>& p2ps) {
  Comm* c = w->comm;
  c->plans().beginUse();
  for (const CollTask& t : colls) {
    if (t.alltoallv) {
      alltoallvRuns(w, t);
      continue;
    }
    std::unique_ptr<mem::WindowBinding> b;
    FERRY_ASSIGN(Run r, collRun(c, t, &b));
    w->runs.push_back(r);
    if (b) w->bindings.push_back(std::move(b));
  }
  if (!p2ps.empty()) w->exchange = p2pRailExchange(c, p2ps);
  if (w->exchange) {
    CollTask t;
    t.info.kind = CollKind::kAllToAllv;
    t.info.count = static_cast<uint64_t>(c->nranks());
    t.info.dtype = static_cast<uint8_t>(kernels::DType::kUint8);
    t.alltoallv = w->exchange;
    alltoallvRuns(w, t);
  } else if (!p2ps.empty()) {
    FERRY_TRY(p2pRun(w, p2ps));
  }
  return Status::ok();
}

Status runExecutor(Comm* c, Executor& e, const char* name, const OpInfo& info) {
  FERRY_TRY(e.start(*c, c->checkOps() ? &info : nullptr));
  // A small run often finishes in its first pass (a Broadcast root, a
  // receiver whose piece is there): no wait to set up for it.
  bool first = false;
  FERRY_TRY(e.progress(&first));
  if (e.done()) return Status::ok();
  Waiter w(c->abortFlag(), c->timeoutMs(), name);
  if (e.waitsOnFds()) w.allowFdWait(true);
  // Ranks outnumber cores: a wait on ranks that are all parked yields at
  // once (presence.h; 4 ranks on 2 cores: 8 B Send/Recv 0.86 and 64 B
  // AllGather 0.69 of the time before, perf/README.md).
  const bool ask = Backoff::oversubscribed();
  if (ask) w.setParkFlag(c->parkFlag());
  while (!e.done()) {
    bool progressed = false;
    FERRY_TRY(e.progress(&progressed));
    if (progressed) {
      w.progressed();
      continue;
    }
    FERRY_TRY(c->boardCheck());
    Status alive = c->peerCheckDue() ? c->checkPeers(e.activePeers()) : Status::ok();
    if (!alive.isOk()) {
      // A peer that finished and exited may have left everything we still
      // need in shared memory: only fail if that does not get us further.
      FERRY_TRY(e.progress(&progressed));
      if (progressed) {
        w.progressed();
        continue;
      }
      return alive;
    }
    FERRY_TRY(w.idle(ask ? c->peerState(e.activePeers()) : PeerState::kUnknown));
  }
  return Status::ok();
}

// runExecutor; a failure names the operation and the rank and is latched
// on the communicator.
Status runLatched(Comm* c, Executor& e, const char* name, const OpInfo& info) {
  Status st = runExecutor(c, e, name, info);
  if (st.isOk()) return st;
  // Another rank of this host failed first: its code and message say why
  // (a peer's flag on a connection only says that it failed).
  if (Status first = c->boardCheck(); !first.isOk()) st = first;
  st = Status(st.code(), std::string(name) + " on rank " + std::to_string(c->rank()) + ": " +
                             st.message());
  FERRY_WARN("%s", st.message().c_str());
  c->fail(st);
  return st;
}

// Run one executor on its communicator; a failure is latched on the comm.
Status runOne(Comm* c, Run& r) {
  if (r.alltoallv) {
    // Counts that disagree are seen by this rank only; failing the
    // communicator tells its peers, which would wait for data otherwise.
    Result<Executor*> e = r.alltoallv->prepare(c);
    if (!e.isOk()) {
      Status st(e.status().code(), std::string(r.name) + " on rank " + std::to_string(c->rank()) +
                                       ": " + e.status().message());
      FERRY_WARN("%s", st.message().c_str());
      c->fail(st);
      return st;
    }
    r.exec = e.value();
  }
  if (r.input || r.output) r.exec->rebind(r.input, r.output, r.reduce);
  r.exec->bindPeers(r.peers);
  r.exec->setGate(r.gate);
  Status st = runLatched(c, *r.exec, r.name, r.info);
  r.exec->setGate(nullptr);  // the executor is cached; the gate is this call's
  return st;
}

void runWork(CommWork* w) {
  Comm* c = w->comm;
  log::setThreadRank(c->rank());
  for (size_t i = 0; i < w->runs.size() && w->result.isOk(); ++i) w->result = runOne(c, w->runs[i]);
}

Status runInits(std::vector<PendingInit>& inits) {
  Status first;
  std::vector<std::thread> threads;
  for (auto& pi : inits) {
    if (!acquireComm(pi.comm, pi.serial)) {
      first = invalidUsage("a communicator created in this group was destroyed "
                           "before the group ended; its initialization did not run");
      pi.comm = nullptr;
      continue;
    }
    if (!pi.comm->config().blocking) {
      pi.comm->initAsync(pi.id);
      first = first.isOk() ? inProgress() : first;
      continue;
    }
    threads.emplace_back([&pi] { (void)pi.comm->init(pi.id); });
  }
  for (auto& t : threads) t.join();
  for (auto& pi : inits) {
    if (!pi.comm) continue;
    if (pi.comm->config().blocking && !pi.comm->ready() && first.isOk())
      first = pi.comm->firstError();
    pi.comm->exit();
  }
  return first;
}

// Names of the operations a group queued for one communicator.
std::string queuedOps(const std::vector<CollTask>& colls, const std::vector<P2pTask>& p2ps) {
  std::string s;
  for (const CollTask& t : colls) s += std::string(s.empty() ? "" : ", ") + collName(t.args.kind);
  if (!p2ps.empty()) s += std::string(s.empty() ? "" : ", ") + std::to_string(p2ps.size()) + " Send/Recv";
  return s;
}

// Work for a communicator destroyed or aborted after its work was queued is
// not run (its memory is gone); the group fails with ncclInvalidUsage.
Status destroyedWhileQueued(const std::vector<CollTask>& colls, const std::vector<P2pTask>& p2ps) {
  return invalidUsage("a communicator was destroyed or aborted while work was "
                      "queued for it in this group (" + queuedOps(colls, p2ps) +
                      "); that work was not run");
}

Status runAll(std::vector<CommWork>& work, size_t n);

// The small-message path of a Send/Recv loop: a group of nothing but the
// same Send/Recv as the communicator's last group (repeatP2p) runs its
// executor at once, without the work lists (per op ~300 of a 2-rank 8 B
// Send/Recv's ~3500 instructions, perf/README.md). False: not such a group
// (or its communicator is gone, which the general path reports), nothing
// done.
bool runP2pRepeat(const GroupState& g, Status* st) {
  if (g.used != 1 || !g.inits.empty()) return false;
  const CommTasks& q = g.comms[0];
  Comm* c = q.comm;
  if (!q.colls.empty() || q.p2ps.empty() || q.device || !acquireComm(c, q.serial)) return false;
  if (c->queueBusy()) {  // the general path drains the stream queue first
    c->exit();
    return false;
  }
  // A rail exchange (FERRY_P2P_RAIL) is never remembered as a repeat.
  Executor* e = nullptr;
  std::shared_ptr<char[]> sendCopy;  // in place: what the sends read, until the run ends
  if (!c->p2pRail()) {
    c->plans().beginUse();
    e = repeatP2p(c, q.p2ps, &sendCopy);
  }
  if (e) {
    log::setThreadRank(c->rank());
    *st = runLatched(c, *e, "Send/Recv", p2pInfo(c));
  }
  c->exit();
  return e != nullptr;
}

Status execute(GroupState& g) {
  if (Status st; runP2pRepeat(g, &st)) return st;
  Status result;
  if (!g.inits.empty()) result = runInits(g.inits);
  // Reused from group to group: a group of one Send and one Recv allocated
  // its work list and run list per call.
  thread_local std::vector<CommWork> work;
  size_t n = 0;
  Status built;
  for (size_t i = 0; i < g.used; ++i) {
    CommTasks& q = g.comms[i];
    Comm* c = q.comm;
    if (!acquireComm(c, q.serial)) {
      Status st = destroyedWhileQueued(q.colls, q.p2ps);
      if (result.isOk() || result.code() == Code::kInProgress) result = st;
      continue;
    }
    // Stream-ordered work goes to the communicator's queue as one job;
    // host work waits for what is queued before it.
    Status q0 = q.device ? bridgeSubmit(c, std::move(q.colls), std::move(q.p2ps)) : c->quiesce();
    if (q.device || !q0.isOk()) {
      c->exit();
      if (!q0.isOk() && (result.isOk() || result.code() == Code::kInProgress)) result = q0;
      continue;
    }
    if (n == work.size()) work.emplace_back();
    work[n].reset(c);
    if (built.isOk()) built = buildWork(&work[n], q.colls, q.p2ps);
    ++n;
  }
  Status ran = built.isOk() ? runAll(work, n) : built;
  for (size_t i = 0; i < n; ++i) {
    work[i].comm->exit();
    work[i].reset(nullptr);
  }
  if (!ran.isOk() && (result.isOk() || result.code() == Code::kInProgress)) result = ran;
  return result;
}

Status runAll(std::vector<CommWork>& work, size_t n) {
  Status result;
  if (n == 0) return result;
  if (n == 1) {
    runWork(&work[0]);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i) threads.emplace_back(runWork, &work[i]);
    for (auto& t : threads) t.join();
  }
  for (size_t i = 0; i < n; ++i)
    if (!work[i].result.isOk() && (result.isOk() || result.code() == Code::kInProgress)) result = work[i].result;
  return result;
}

// A collective outside a group, on the caller's thread.
Status runStandalone(Comm* c, Run& r) {
  log::setThreadRank(c->rank());
  c->enter();
  Status st = runOne(c, r);
  c->exit();
  return st;
}

// Work outside a group: built and run at once on the caller's thread.
Status runAlone(Comm* c, const std::vector<CollTask>& colls, const std::vector<P2pTask>& p2ps) {
  CommWork w{c, {}, Status(), {}};
  FERRY_TRY(buildWork(&w, colls, p2ps));
  c->enter();  // an abort from another thread waits for us
  runWork(&w);
  c->exit();
  return w.result;
}

}  // namespace

int groupDepth() { return group().depth; }

Status groupStart() {
  group().depth++;
  return Status::ok();
}

Status groupEnd() {
  GroupState& g = group();
  if (g.depth == 0) return invalidUsage("ncclGroupEnd called without a matching ncclGroupStart");
  if (--g.depth > 0) return Status::ok();
  Status st = execute(g);
  g.clear();
  return st;
}

Status groupSimulateEnd(float* estimatedUs) {
  GroupState& g = group();
  if (g.depth == 0)
    return invalidUsage("ncclGroupSimulateEnd called without a matching ncclGroupStart");
  if (--g.depth > 0) return Status::ok();
  // The cost model's prediction for what would run (algorithms/tuner.h);
  // the operations of a group run one after another.
  double total = 0;
  for (size_t i = 0; i < g.used; ++i) {
    CommTasks& q = g.comms[i];
    Comm* comm = q.comm;
    if (!acquireComm(comm, q.serial)) continue;  // destroyed: nothing to estimate
    for (const CollTask& t : q.colls) {
      Result<Choice> ch = choose(comm, t.args);
      if (ch.isOk()) total += ch.value().predictedUs;
    }
    // Point-to-point: one hop each, over the link to the peer.
    const CommView& v = comm->view();
    for (const P2pTask& t : q.p2ps) {
      const LinkCost& l = v.hostOf.empty() ? v.intra : v.link(v.level(comm->rank(), t.peer));
      total += cost::hop(v, l, static_cast<double>(t.bytes));
    }
    comm->exit();
  }
  *estimatedUs = static_cast<float>(total);
  g.clear();
  return Status::ok();
}

// Outside a group: one task on one communicator, without the group's
// bookkeeping (this is the small-message latency path).
Status enqueueColl(const CollTask& t) {
  GroupState& g = group();
  if (t.dev) [[unlikely]] {
    // Device windows run as stream work at once, inside a group too: every
    // rank decides alike from its own arguments, so the order holds.
    FERRY_ASSIGN(bool direct, t.comm->direct().submit(t));
    if (direct) return Status::ok();
    if (g.depth == 0) return bridgeSubmit(t.comm, {t}, {});
    CommTasks& q = g.of(t.comm);
    q.colls.push_back(t);
    q.device = true;
    return Status::ok();
  }
  if (g.depth == 0 && t.alltoallv) return runAlone(t.comm, {t}, {});
  if (g.depth == 0) {
    Comm* c = t.comm;
    std::unique_ptr<mem::WindowBinding> binding;
    c->plans().beginUse();
    FERRY_ASSIGN(Run r, collRun(c, t, &binding));
    if (t.key.kind >= 0 && !binding && !t.reduce.premul)
      c->repeats().remember(RepeatEntry{t.key, c->plans().refOf(r.exec), r.reduce, t.info, r.name,
                                        t.sendCopyBytes});
    return runStandalone(c, r);
  }
  g.of(t.comm).colls.push_back(t);
  return Status::ok();
}

bool findRepeat(Comm* c, const CallKey& k, Repeat* out) {
  if (group().depth != 0 || c->windows().sync()) return false;
  const RepeatEntry* e = c->repeats().find(k);
  if (!e) return false;
  c->plans().beginUse();
  *out = Repeat{e, c->plans().touch(e->plan)};
  return out->exec != nullptr;
}

// runStandalone's work for a remembered call, without building a Run:
// per 8 B operation, each layer between the API and the executor was tens of
// instructions (perf/README.md, "A prepared program for small operations").
Status runRepeat(Comm* c, const Repeat& rep) {
  const RepeatEntry& e = *rep.entry;
  Executor& x = *rep.exec;
  void* input = const_cast<void*>(e.key.sendbuff);
  std::shared_ptr<char[]> copy;  // the pool's block, free again when the call returns
  if (e.sendCopyBytes) {  // in-place AlltoAll: blocks arrive while others are still sent
    FERRY_ASSIGN(copy, c->staging().copyOf(input, e.sendCopyBytes));
    input = copy.get();
  }
  x.rebind(input, const_cast<void*>(e.key.recvbuff), e.reduce);
  x.bindPeers(nullptr);  // remembered calls never use windows (repeat_call.h)
  OpInfo info = e.info;
  info.collSeq = c->nextCollSeq();
  info.self = c->rank();
  log::setThreadRank(c->rank());
  c->enter();
  Status st = runLatched(c, x, e.name, info);
  c->exit();
  return st;
}

// Outside a group (rare for Send/Recv): out of line, so that the common
// path does not set up the vectors' frame.
[[gnu::noinline]] static Status runAloneP2p(const P2pTask& t) { return runAlone(t.comm, {}, {t}); }

Status enqueueP2p(const P2pTask& t) {
  GroupState& g = group();
  if (g.depth == 0) [[unlikely]] return t.dev ? bridgeSubmit(t.comm, {}, {t}) : runAloneP2p(t);
  CommTasks& q = g.of(t.comm);
  q.p2ps.push_back(t);
  if (t.dev) [[unlikely]] q.device = true;
  return Status::ok();
}

Status enqueueInit(Comm* c, const ncclUniqueId& id) {
  group().inits.push_back(PendingInit{c, c->serial(), id});
  return Status::ok();
}

}  // namespace ferry
