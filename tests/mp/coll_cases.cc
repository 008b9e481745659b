// Exact-value collective cases (see coll_cases.h).
#include "tests/mp/coll_cases.h"

#include <cstdio>
#include <string>

namespace ferry::mp {
namespace {

constexpr size_t kGuard = 4;  // sentinel elements after every receive region

std::string desc(const char* coll, const Rank& me, ncclDataType_t dt, const char* op, size_t count,
                 int root, bool inPlace) {
  char b[200];
  snprintf(b, sizeof(b), "%s %s%s%s count=%zu nranks=%d rank=%d%s%s", coll, dtypeName(dt),
           op ? " " : "", op ? op : "", count, me.nranks, me.rank,
           root >= 0 ? (" root=" + std::to_string(root)).c_str() : "", inPlace ? " in-place" : "");
  return b;
}

bool checkGuard(const HostBuf& b, size_t from, const std::string& what) {
  double s = sentinelValue(b.dtype());
  return checkBuf(b, from, b.count() - from, [s](size_t) { return s; }, what + " (guard past end)");
}

}  // namespace

int withComm(int rank, int nranks, const ncclUniqueId& id, const std::function<int(const Rank&)>& f) {
  ncclComm_t comm = nullptr;
  MP_NCCL(initComm(&comm, nranks, id, rank));
  int rc = f(Rank{comm, rank, nranks});
  if (rc != 0) {
    ncclCommAbort(comm);
    return rc;
  }
  MP_NCCL(closeComm(comm));
  return 0;
}

int caseAllReduce(const Rank& me, const RedCase& c, size_t count, bool inPlace) {
  std::string what = desc("AllReduce", me, c.dt, opName(c.op), count, -1, inPlace);
  HostBuf send(c.dt, count + kGuard), recv(c.dt, count + kGuard);
  send.fill(sentinelValue(c.dt));
  recv.fill(sentinelValue(c.dt));
  for (size_t i = 0; i < count; ++i) send.set(i, redInput(c, me.rank, i));
  HostBuf& out = inPlace ? send : recv;
  ncclRedOp_t op;
  MP_NCCL(acquireOp(c.op, c.dt, me.comm, &op));
  ncclResult_t r = ncclAllReduce(send.data(), out.data(), count, c.dt, op, me.comm, nullptr);
  MP_NCCL(releaseOp(c.op, op, me.comm));
  MP_CHECK(r == ncclSuccess, "%s returned %s", what.c_str(), resultName(r).c_str());
  MP_CHECK(checkBuf(out, 0, count, [&](size_t i) { return redExpected(c, i); }, what));
  MP_CHECK(checkGuard(out, count, what));
  return 0;
}

int caseReduce(const Rank& me, const RedCase& c, size_t count, int root, bool inPlace) {
  std::string what = desc("Reduce", me, c.dt, opName(c.op), count, root, inPlace);
  HostBuf send(c.dt, count + kGuard), recv(c.dt, count + kGuard);
  send.fill(sentinelValue(c.dt));
  recv.fill(sentinelValue(c.dt));
  for (size_t i = 0; i < count; ++i) send.set(i, redInput(c, me.rank, i));
  HostBuf& out = inPlace ? send : recv;
  ncclRedOp_t op;
  MP_NCCL(acquireOp(c.op, c.dt, me.comm, &op));
  ncclResult_t r = ncclReduce(send.data(), out.data(), count, c.dt, op, root, me.comm, nullptr);
  MP_NCCL(releaseOp(c.op, op, me.comm));
  MP_CHECK(r == ncclSuccess, "%s returned %s", what.c_str(), resultName(r).c_str());
  if (me.rank == root) {
    MP_CHECK(checkBuf(out, 0, count, [&](size_t i) { return redExpected(c, i); }, what));
    MP_CHECK(checkGuard(out, count, what));
  } else if (!inPlace) {
    // recvbuff is not used on non-root ranks.
    MP_CHECK(checkGuard(recv, 0, what + " non-root recvbuff"));
  }
  return 0;
}

int caseReduceScatter(const Rank& me, const RedCase& c, size_t rc, bool inPlace) {
  std::string what = desc("ReduceScatter", me, c.dt, opName(c.op), rc, -1, inPlace);
  const size_t total = rc * size_t(me.nranks);
  HostBuf send(c.dt, total + kGuard), recv(c.dt, rc + kGuard);
  send.fill(sentinelValue(c.dt));
  recv.fill(sentinelValue(c.dt));
  for (size_t i = 0; i < total; ++i) send.set(i, redInput(c, me.rank, i));
  // In place: recvbuff == sendbuff + rank * recvcount.
  void* out = inPlace ? send.at(size_t(me.rank) * rc) : recv.data();
  ncclRedOp_t op;
  MP_NCCL(acquireOp(c.op, c.dt, me.comm, &op));
  ncclResult_t r = ncclReduceScatter(send.data(), out, rc, c.dt, op, me.comm, nullptr);
  MP_NCCL(releaseOp(c.op, op, me.comm));
  MP_CHECK(r == ncclSuccess, "%s returned %s", what.c_str(), resultName(r).c_str());
  const size_t base = size_t(me.rank) * rc;
  auto expect = [&](size_t i) { return redExpected(c, base + i); };
  if (inPlace) {
    MP_CHECK(checkBuf(send, base, rc, expect, what));
    MP_CHECK(checkGuard(send, total, what));
  } else {
    MP_CHECK(checkBuf(recv, 0, rc, expect, what));
    MP_CHECK(checkGuard(recv, rc, what));
  }
  return 0;
}

int caseBroadcast(const Rank& me, ncclDataType_t dt, size_t count, int root, bool inPlace) {
  std::string what = desc("Broadcast", me, dt, nullptr, count, root, inPlace);
  HostBuf send(dt, count + kGuard), recv(dt, count + kGuard);
  send.fill(sentinelValue(dt));
  recv.fill(sentinelValue(dt));
  // Non-root send buffers keep the sentinel: in place, they must be overwritten.
  if (me.rank == root)
    for (size_t i = 0; i < count; ++i) send.set(i, moveValue(dt, root, i));
  HostBuf& out = inPlace ? send : recv;
  ncclResult_t r = ncclBroadcast(send.data(), out.data(), count, dt, root, me.comm, nullptr);
  MP_CHECK(r == ncclSuccess, "%s returned %s", what.c_str(), resultName(r).c_str());
  MP_CHECK(checkBuf(out, 0, count, [&](size_t i) { return moveValue(dt, root, i); }, what));
  MP_CHECK(checkGuard(out, count, what));
  return 0;
}

int caseBcast(const Rank& me, ncclDataType_t dt, size_t count, int root) {
  std::string what = desc("Bcast", me, dt, nullptr, count, root, true);
  HostBuf buf(dt, count + kGuard);
  buf.fill(sentinelValue(dt));
  if (me.rank == root)
    for (size_t i = 0; i < count; ++i) buf.set(i, moveValue(dt, root, i));
  ncclResult_t r = ncclBcast(buf.data(), count, dt, root, me.comm, nullptr);
  MP_CHECK(r == ncclSuccess, "%s returned %s", what.c_str(), resultName(r).c_str());
  MP_CHECK(checkBuf(buf, 0, count, [&](size_t i) { return moveValue(dt, root, i); }, what));
  MP_CHECK(checkGuard(buf, count, what));
  return 0;
}

int caseAllGather(const Rank& me, ncclDataType_t dt, size_t count, bool inPlace) {
  std::string what = desc("AllGather", me, dt, nullptr, count, -1, inPlace);
  const size_t total = count * size_t(me.nranks);
  HostBuf send(dt, count + kGuard), recv(dt, total + kGuard);
  send.fill(sentinelValue(dt));
  recv.fill(sentinelValue(dt));
  // In place: sendbuff == recvbuff + rank * sendcount.
  HostBuf& src = inPlace ? recv : send;
  const size_t off = inPlace ? size_t(me.rank) * count : 0;
  for (size_t i = 0; i < count; ++i) src.set(off + i, moveValue(dt, me.rank, i));
  ncclResult_t r = ncclAllGather(src.at(off), recv.data(), count, dt, me.comm, nullptr);
  MP_CHECK(r == ncclSuccess, "%s returned %s", what.c_str(), resultName(r).c_str());
  for (int p = 0; p < me.nranks; ++p)
    MP_CHECK(checkBuf(recv, size_t(p) * count, count, [&](size_t i) { return moveValue(dt, p, i); },
                      what + " block from rank " + std::to_string(p)));
  MP_CHECK(checkGuard(recv, total, what));
  return 0;
}

int caseAlltoAll(const Rank& me, ncclDataType_t dt, size_t count) {
  std::string what = desc("AlltoAll", me, dt, nullptr, count, -1, false);
  const size_t total = count * size_t(me.nranks);
  HostBuf send(dt, total + kGuard), recv(dt, total + kGuard);
  send.fill(sentinelValue(dt));
  recv.fill(sentinelValue(dt));
  // Block p of my send buffer goes to rank p; value names (me, index in my send buffer).
  for (size_t j = 0; j < total; ++j) send.set(j, moveValue(dt, me.rank, j));
  ncclResult_t r = ncclAlltoAll(send.data(), recv.data(), count, dt, me.comm, nullptr);
  MP_CHECK(r == ncclSuccess, "%s returned %s", what.c_str(), resultName(r).c_str());
  const size_t mine = size_t(me.rank) * count;
  for (int p = 0; p < me.nranks; ++p)
    MP_CHECK(checkBuf(recv, size_t(p) * count, count, [&](size_t i) { return moveValue(dt, p, mine + i); },
                      what + " block from rank " + std::to_string(p)));
  MP_CHECK(checkGuard(recv, total, what));
  return 0;
}

int caseGather(const Rank& me, ncclDataType_t dt, size_t count, int root, bool inPlace) {
  std::string what = desc("Gather", me, dt, nullptr, count, root, inPlace);
  const size_t total = count * size_t(me.nranks);
  HostBuf send(dt, count + kGuard), recv(dt, total + kGuard);
  send.fill(sentinelValue(dt));
  recv.fill(sentinelValue(dt));
  // In place (root only): sendbuff == recvbuff + root * count.
  bool ip = inPlace && me.rank == root;
  HostBuf& src = ip ? recv : send;
  const size_t off = ip ? size_t(root) * count : 0;
  for (size_t i = 0; i < count; ++i) src.set(off + i, moveValue(dt, me.rank, i));
  ncclResult_t r = ncclGather(src.at(off), recv.data(), count, dt, root, me.comm, nullptr);
  MP_CHECK(r == ncclSuccess, "%s returned %s", what.c_str(), resultName(r).c_str());
  if (me.rank == root) {
    for (int p = 0; p < me.nranks; ++p)
      MP_CHECK(checkBuf(recv, size_t(p) * count, count, [&](size_t i) { return moveValue(dt, p, i); },
                        what + " block from rank " + std::to_string(p)));
    MP_CHECK(checkGuard(recv, total, what));
  } else {
    MP_CHECK(checkGuard(recv, 0, what + " non-root recvbuff"));
  }
  return 0;
}

int caseScatter(const Rank& me, ncclDataType_t dt, size_t count, int root, bool inPlace) {
  std::string what = desc("Scatter", me, dt, nullptr, count, root, inPlace);
  const size_t total = count * size_t(me.nranks);
  HostBuf send(dt, total + kGuard), recv(dt, count + kGuard);
  send.fill(sentinelValue(dt));
  recv.fill(sentinelValue(dt));
  if (me.rank == root)
    for (int p = 0; p < me.nranks; ++p)
      for (size_t i = 0; i < count; ++i) send.set(size_t(p) * count + i, moveValue(dt, p, i));
  // In place (root only): recvbuff == sendbuff + root * count.
  bool ip = inPlace && me.rank == root;
  HostBuf& dst = ip ? send : recv;
  const size_t off = ip ? size_t(root) * count : 0;
  ncclResult_t r = ncclScatter(send.data(), dst.at(off), count, dt, root, me.comm, nullptr);
  MP_CHECK(r == ncclSuccess, "%s returned %s", what.c_str(), resultName(r).c_str());
  MP_CHECK(checkBuf(dst, off, count, [&](size_t i) { return moveValue(dt, me.rank, i); }, what));
  MP_CHECK(checkGuard(dst, ip ? total : count, what));
  return 0;
}

int caseSendRecvRing(const Rank& me, ncclDataType_t dt, size_t count) {
  std::string what = desc("SendRecv ring", me, dt, nullptr, count, -1, false);
  const int next = (me.rank + 1) % me.nranks, prev = (me.rank + me.nranks - 1) % me.nranks;
  HostBuf send(dt, count + kGuard), recv(dt, count + kGuard);
  send.fill(sentinelValue(dt));
  recv.fill(sentinelValue(dt));
  for (size_t i = 0; i < count; ++i) send.set(i, moveValue(dt, me.rank, i));
  MP_NCCL(ncclGroupStart());
  ncclResult_t rs = ncclSend(send.data(), count, dt, next, me.comm, nullptr);
  ncclResult_t rr = ncclRecv(recv.data(), count, dt, prev, me.comm, nullptr);
  ncclResult_t re = ncclGroupEnd();
  MP_CHECK(rs == ncclSuccess && rr == ncclSuccess && re == ncclSuccess, "%s: send %s recv %s groupEnd %s",
           what.c_str(), resultName(rs).c_str(), resultName(rr).c_str(), resultName(re).c_str());
  MP_CHECK(checkBuf(recv, 0, count, [&](size_t i) { return moveValue(dt, prev, i); }, what));
  MP_CHECK(checkGuard(recv, count, what));
  return 0;
}

int caseSendRecvAllPairs(const Rank& me, ncclDataType_t dt, size_t count) {
  std::string what = desc("SendRecv all-pairs", me, dt, nullptr, count, -1, false);
  const size_t total = count * size_t(me.nranks);
  HostBuf send(dt, total + kGuard), recv(dt, total + kGuard);
  send.fill(sentinelValue(dt));
  recv.fill(sentinelValue(dt));
  for (size_t j = 0; j < total; ++j) send.set(j, moveValue(dt, me.rank, j));
  MP_NCCL(ncclGroupStart());
  ncclResult_t bad = ncclSuccess;
  for (int p = 0; p < me.nranks; ++p) {
    ncclResult_t a = ncclSend(send.at(size_t(p) * count), count, dt, p, me.comm, nullptr);
    ncclResult_t b = ncclRecv(recv.at(size_t(p) * count), count, dt, p, me.comm, nullptr);
    if (bad == ncclSuccess) bad = a != ncclSuccess ? a : b;
  }
  ncclResult_t re = ncclGroupEnd();
  MP_CHECK(bad == ncclSuccess && re == ncclSuccess, "%s: send/recv %s groupEnd %s", what.c_str(),
           resultName(bad).c_str(), resultName(re).c_str());
  const size_t mine = size_t(me.rank) * count;
  for (int p = 0; p < me.nranks; ++p)
    MP_CHECK(checkBuf(recv, size_t(p) * count, count, [&](size_t i) { return moveValue(dt, p, mine + i); },
                      what + " block from rank " + std::to_string(p)));
  MP_CHECK(checkGuard(recv, total, what));
  return 0;
}

int caseAllMovement(const Rank& me, ncclDataType_t dt, size_t count) {
  const int last = me.nranks - 1;
  for (int root : {0, last}) {
    MP_TRY(caseBroadcast(me, dt, count, root, false));
    MP_TRY(caseBcast(me, dt, count, root));
    MP_TRY(caseGather(me, dt, count, root, false));
    MP_TRY(caseScatter(me, dt, count, root, false));
    if (last == 0) break;
  }
  MP_TRY(caseAllGather(me, dt, count, false));
  MP_TRY(caseAlltoAll(me, dt, count));
  MP_TRY(caseSendRecvRing(me, dt, count));
  return 0;
}

int caseAllReductions(const Rank& me, const RedCase& c, size_t count) {
  MP_TRY(caseAllReduce(me, c, count, false));
  MP_TRY(caseReduce(me, c, count, me.nranks - 1, false));
  MP_TRY(caseReduceScatter(me, c, count, false));
  return 0;
}

int caseEveryShape(const Rank& me, std::initializer_list<size_t> counts) {
  const int last = me.nranks - 1;
  for (size_t count : counts) {
    for (bool inPlace : {false, true}) {
      for (RedCase c : {RedCase{ncclInt32, TestOp::kSum, me.nranks}, RedCase{ncclFloat64, TestOp::kMax, me.nranks}}) {
        MP_TRY(caseAllReduce(me, c, count, inPlace));
        MP_TRY(caseReduce(me, c, count, last, inPlace));
        MP_TRY(caseReduceScatter(me, c, count, inPlace));
      }
      for (int root : {0, last}) {
        MP_TRY(caseBroadcast(me, ncclInt32, count, root, inPlace));
        MP_TRY(caseGather(me, ncclInt32, count, root, inPlace));
        MP_TRY(caseScatter(me, ncclInt32, count, root, inPlace));
      }
      MP_TRY(caseAllGather(me, ncclUint8, count, inPlace));
    }
    MP_TRY(caseAlltoAll(me, ncclInt32, count));
    MP_TRY(caseSendRecvRing(me, ncclInt32, count));
    MP_TRY(caseSendRecvAllPairs(me, ncclFloat32, count));
  }
  return 0;
}

}  // namespace ferry::mp
