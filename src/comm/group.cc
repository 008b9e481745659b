#include "comm/group.h"

#include <map>
#include <thread>
#include <vector>

#include "algorithms/algorithm.h"
#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"

namespace ferry {
namespace {

struct PendingInit {
  Comm* comm;
  ncclUniqueId id;
};

struct GroupState {
  int depth = 0;
  std::vector<Comm*> order;  // communicators in order of first use
  std::map<Comm*, std::vector<CollTask>> colls;
  std::map<Comm*, std::vector<P2pTask>> p2ps;
  std::vector<PendingInit> inits;
  void clear() {
    order.clear();
    colls.clear();
    p2ps.clear();
    inits.clear();
  }
  void touch(Comm* c) {
    if (!colls.count(c) && !p2ps.count(c)) order.push_back(c);
  }
};

thread_local GroupState tGroup;

struct CommWork {
  Comm* comm;
  std::vector<std::unique_ptr<Executor>> execs;
  std::vector<std::string> names;
  Status result;
};

Status buildWork(CommWork* w, const std::vector<CollTask>& colls, const std::vector<P2pTask>& p2ps) {
  Comm* c = w->comm;
  const std::string& algoFilter = c->algoFilter();
  for (const CollTask& t : colls) {
    CollArgs args = t.args;
    args.chunkBytes = c->chunkBytes();
    args.directMaxBytes = c->directMaxBytes();
    FERRY_ASSIGN(Schedule s, selectSchedule(args, algoFilter));
    std::vector<void*> bufs = {const_cast<void*>(t.sendbuff), t.recvbuff};
    w->execs.push_back(std::make_unique<Executor>(std::move(s), std::move(bufs), t.args.elemSize,
                                                  t.reduce, c->execOptions()));
    w->names.push_back(collName(t.args.kind));
  }
  if (!p2ps.empty()) {
    std::vector<P2pOp> ops;
    std::vector<void*> bufs;
    for (const P2pTask& t : p2ps) {
      ops.push_back(P2pOp{t.isSend, t.peer, t.bytes});
      bufs.push_back(t.buf);
    }
    w->execs.push_back(std::make_unique<Executor>(p2pSchedule(c->rank(), ops), std::move(bufs), 1,
                                                  ReduceSpec{}, c->execOptions()));
    w->names.push_back("Send/Recv");
  }
  return Status::ok();
}

Status runExecutor(Comm* c, Executor& e, const char* name) {
  FERRY_TRY(e.start(*c));
  Waiter w(c->abortFlag(), c->timeoutMs(), name);
  while (!e.done()) {
    bool progressed = false;
    FERRY_TRY(e.progress(&progressed));
    if (progressed) {
      w.progressed();
      continue;
    }
    Status alive = c->checkPeers(e.activePeers());
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
    FERRY_TRY(w.idle());
  }
  return Status::ok();
}

void runWork(CommWork* w) {
  Comm* c = w->comm;
  log::setThreadRank(c->rank());
  c->enter();
  for (size_t i = 0; i < w->execs.size() && w->result.isOk(); ++i) {
    Status st = runExecutor(c, *w->execs[i], w->names[i].c_str());
    if (!st.isOk()) {
      w->result = Status(st.code(), w->names[i] + " on rank " + std::to_string(c->rank()) + ": " +
                                        st.message());
      FERRY_WARN("%s", w->result.message().c_str());
      c->fail(w->result);
    }
  }
  c->exit();
}

Status runInits(std::vector<PendingInit>& inits) {
  Status first;
  std::vector<std::thread> threads;
  for (auto& pi : inits) {
    if (!pi.comm->config().blocking) {
      pi.comm->initAsync(pi.id);
      first = first.isOk() ? inProgress() : first;
      continue;
    }
    threads.emplace_back([&pi] { (void)pi.comm->init(pi.id); });
  }
  for (auto& t : threads) t.join();
  for (auto& pi : inits) {
    if (pi.comm->config().blocking && !pi.comm->ready() && first.isOk())
      first = pi.comm->firstError();
  }
  return first;
}

Status execute(GroupState& g) {
  Status result;
  if (!g.inits.empty()) result = runInits(g.inits);
  std::vector<CommWork> work;
  for (Comm* c : g.order) {
    work.push_back(CommWork{c, {}, {}, Status()});
    Status st = buildWork(&work.back(), g.colls[c], g.p2ps[c]);
    if (!st.isOk()) return st;
  }
  if (work.size() == 1) {
    runWork(&work[0]);
  } else {
    std::vector<std::thread> threads;
    for (auto& w : work) threads.emplace_back(runWork, &w);
    for (auto& t : threads) t.join();
  }
  for (auto& w : work)
    if (!w.result.isOk() && (result.isOk() || result.code() == Code::kInProgress)) result = w.result;
  return result;
}

}  // namespace

int groupDepth() { return tGroup.depth; }

Status groupStart() {
  tGroup.depth++;
  return Status::ok();
}

Status groupEnd() {
  if (tGroup.depth == 0) return invalidUsage("ncclGroupEnd called without a matching ncclGroupStart");
  if (--tGroup.depth > 0) return Status::ok();
  Status st = execute(tGroup);
  tGroup.clear();
  return st;
}

Status groupSimulateEnd(float* estimatedUs) {
  if (tGroup.depth == 0)
    return invalidUsage("ncclGroupSimulateEnd called without a matching ncclGroupStart");
  if (--tGroup.depth > 0) return Status::ok();
  // A simple latency-bandwidth model: each step costs a hop latency plus its
  // bytes over the link bandwidth (shared memory figures of this class of machine).
  const double kHopUs = 1.0, kBytesPerUs = 4000.0;
  double total = 0;
  std::string filter = config::getString(config::Param::kAlgo);
  for (auto& [comm, tasks] : tGroup.colls) {
    for (const CollTask& t : tasks) {
      Result<Schedule> s = selectSchedule(t.args, filter);
      if (!s.isOk()) continue;
      for (const Lane& l : s.value().lanes)
        for (const Step& st : l.steps) total += kHopUs + st.bytes / kBytesPerUs;
    }
  }
  for (auto& [comm, tasks] : tGroup.p2ps)
    for (const P2pTask& t : tasks) total += kHopUs + t.bytes / kBytesPerUs;
  *estimatedUs = static_cast<float>(total);
  tGroup.clear();
  return Status::ok();
}

// Outside a group: one task on one communicator, without the group's
// bookkeeping (this is the small-message latency path).
Status runNow(Comm* c, const std::vector<CollTask>& colls, const std::vector<P2pTask>& p2ps) {
  CommWork w{c, {}, {}, Status()};
  FERRY_TRY(buildWork(&w, colls, p2ps));
  runWork(&w);
  return w.result;
}

Status enqueueColl(const CollTask& t) {
  if (tGroup.depth == 0) return runNow(t.comm, {t}, {});
  tGroup.touch(t.comm);
  tGroup.colls[t.comm].push_back(t);
  return Status::ok();
}

Status enqueueP2p(const P2pTask& t) {
  if (tGroup.depth == 0) return runNow(t.comm, {}, {t});
  tGroup.touch(t.comm);
  tGroup.p2ps[t.comm].push_back(t);
  return Status::ok();
}

Status enqueueInit(Comm* c, const ncclUniqueId& id) {
  tGroup.inits.push_back(PendingInit{c, id});
  return Status::ok();
}

}  // namespace ferry
