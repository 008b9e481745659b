#include "comm/p2p_plan.h"

#include <cstring>

#include "algorithms/schedule.h"
#include "comm/p2p_exchange.h"

namespace ferry {
namespace {

// Copies the sends' bytes back to back into `copy`; bind(i, where) tells
// each send (with bytes) where its copy is.
template <typename Bind>
void copySends(const std::vector<P2pTask>& p2ps, char* copy, Bind bind) {
  size_t at = 0;
  for (size_t i = 0; i < p2ps.size(); ++i) {
    if (!p2ps[i].isSend || p2ps[i].bytes == 0) continue;
    std::memcpy(copy + at, p2ps[i].buf, p2ps[i].bytes);
    bind(i, copy + at);
    at += p2ps[i].bytes;
  }
}

// In-place Send/Recv (a send block overlaps a receive block): the sends go
// from a copy taken now. Otherwise a peer reading our send block by
// reference races our receive into it (undefined data, and 1 MiB took
// 150-550 us against 83 out of place).
// The copy is the staging pool's block, free again once the run drops it
// (a block held between calls made the pool map a fresh one for every
// other group); bind as copySends'.
template <typename Bind>
Result<std::shared_ptr<char[]>> sendFromCopy(Comm* c, const std::vector<P2pTask>& p2ps, Bind bind) {
  size_t total = 0;
  for (const P2pTask& t : p2ps) total += t.isSend ? t.bytes : 0;
  FERRY_ASSIGN(std::shared_ptr<char[]> copy, c->staging().take(total));
  copySends(p2ps, copy.get(), bind);
  return copy;
}

P2pKey keyOf(const P2pTask& t) { return P2pKey{t.buf, t.bytes, t.peer, t.isSend}; }

bool sameP2ps(const std::vector<P2pKey>& keys, const std::vector<P2pTask>& p2ps) {
  size_t n = keys.size();
  if (n != p2ps.size()) return false;
  const P2pKey* k = keys.data();
  const P2pTask* t = p2ps.data();
  for (size_t i = 0; i < n; ++i)
    if (k[i].buf != t[i].buf || k[i].bytes != t[i].bytes || k[i].peer != t[i].peer ||
        k[i].isSend != t[i].isSend)
      return false;
  return true;
}

void rememberP2p(Comm* c, const std::vector<P2pTask>& p2ps, const Executor* e, bool sendsFromCopy) {
  P2pRepeat& last = c->repeats().lastP2p();
  last.ops.clear();
  for (const P2pTask& t : p2ps) last.ops.push_back(keyOf(t));
  last.plan = c->plans().refOf(e);
  last.binds = e->binds();
  last.sendsFromCopy = sendsFromCopy;
}

}  // namespace

Executor* repeatP2p(Comm* c, const std::vector<P2pTask>& p2ps, std::shared_ptr<char[]>* sendCopy) {
  P2pRepeat& last = c->repeats().lastP2p();
  if (!sameP2ps(last.ops, p2ps)) return nullptr;
  Executor* e = c->plans().touch(last.plan);
  if (!e) return nullptr;
  // Another group of the same shape may have bound other buffers since.
  if (last.binds != e->binds()) {
    for (size_t i = 0; i < p2ps.size(); ++i) e->rebindBuffer(i, p2ps[i].buf);
  }
  if (last.sendsFromCopy) {
    auto copy = sendFromCopy(c, p2ps, [&](size_t i, char* p) { e->rebindBuffer(i, p); });
    if (!copy.isOk()) return nullptr;  // the general path takes it again, and reports
    *sendCopy = copy.value();
  }
  last.binds = e->binds();
  return e;
}

Result<Executor*> p2pExecutor(Comm* c, const std::vector<P2pTask>& p2ps,
                              std::shared_ptr<char[]>* sendCopy) {
  // Scratch reused call to call: a cached plan's lookup allocates nothing.
  thread_local std::vector<P2pOp> ops;
  thread_local std::vector<void*> bufs;
  ops.clear();
  bufs.clear();
  for (const P2pTask& t : p2ps) {
    ops.push_back(P2pOp{t.isSend, t.peer, t.bytes});
    bufs.push_back(t.buf);
  }
  bool overlap = sendsOverlapReceives(p2ps);
  if (overlap) {
    FERRY_ASSIGN(*sendCopy, sendFromCopy(c, p2ps, [&](size_t i, char* p) { bufs[i] = p; }));
  }
  Executor* e = c->plans().findP2p(ops);
  if (e) {
    e->rebindBuffers(bufs);
  } else {
    e = c->plans().addP2p(ops, std::make_unique<Executor>(p2pSchedule(c->rank(), ops), bufs, 1,
                                                          ReduceSpec{}, c->execOptions()));
  }
  rememberP2p(c, p2ps, e, overlap);
  return e;
}

OpInfo p2pInfo(const Comm* c) {
  OpInfo i;
  i.self = c->rank();
  return i;
}

}  // namespace ferry
