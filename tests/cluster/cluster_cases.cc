// Exact-value collective cases (see cluster_cases.h). Values are small
// non-negative integers, exact in float and int32 for every sum the cases
// form; -1 marks "never written" (sentinel fill and kGuard elements past the
// end of every receive region).
#include "tests/cluster/cluster_cases.h"

#include <ferry/device.h>
#include <ferry/ferry.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace ferry::cluster {
namespace {

constexpr size_t kGuard = 4;
constexpr int kSentinel = -1;

float sumIn(int r, size_t i) { return float((r + 1) + int(i % 13)); }
float sumOut(int n, size_t i) { return float(n * (n + 1) / 2 + n * int(i % 13)); }
float maxIn(int r, size_t i) { return float((i * 5 + size_t(r) * 3) % 7); }
float maxOut(int n, size_t i) {
  float m = 0;
  for (int r = 0; r < n; ++r) m = std::max(m, maxIn(r, i));
  return m;
}
// One rank adds n, every rank adds base(i): the sum n*(base+1) divides by n.
int32_t avgIn(int n, int r, size_t i) { return (i % 3 == 0 ? 1 : 0) + (int(i % size_t(n)) == r ? n : 0); }
int32_t avgOut(size_t i) { return (i % 3 == 0 ? 1 : 0) + 1; }
// Data-movement payload: distinct per (source block, index), exact in float.
float mv(int src, size_t i) { return float((uint64_t(src) * 7919 + i) % 65521); }

template <class T>
std::vector<T> makeBuf(size_t n) {
  return std::vector<T>(n + kGuard, T(kSentinel));
}

// Checks buf[off+k] == expect(k) for k < n, then that every element from
// `guardFrom` on still holds the sentinel. Prints up to 3 mismatches.
template <class T>
bool check(const std::vector<T>& buf, size_t off, size_t n, const std::function<T(size_t)>& expect,
           size_t guardFrom, const std::string& what) {
  int bad = 0;
  for (size_t k = 0; k < n; ++k) {
    if (buf[off + k] != expect(k) && bad++ < 3)
      printf("FAIL %s: element %zu is %g, expected %g\n", what.c_str(), off + k, double(buf[off + k]),
             double(expect(k)));
  }
  for (size_t k = guardFrom; k < buf.size(); ++k) {
    if (buf[k] != T(kSentinel) && bad++ < 3)
      printf("FAIL %s: element %zu past the end was overwritten (%g)\n", what.c_str(), k, double(buf[k]));
  }
  return bad == 0;
}

// Device mode (FERRY_CLUSTER_DEVICE_HOSTS, setDeviceMode): the buffer a
// case passes is a device copy of its vector, uploaded when first passed;
// callOk, after every call or group, downloads every copy into its vector
// (on the default stream, which the call was queued on) and frees it. Off:
// the vector's own memory.
struct Mirror {
  void* host;
  void* dev;
  size_t bytes;
};
bool gDevice = false;
std::vector<Mirror> gMirrors;

template <class T>
T* D(std::vector<T>& v) {
  if (!gDevice) return v.data();
  for (const Mirror& m : gMirrors)
    if (m.host == v.data()) return static_cast<T*>(m.dev);
  Mirror m{v.data(), nullptr, v.size() * sizeof(T)};
  if (ferryDeviceAlloc(&m.dev, m.bytes) != ncclSuccess ||
      ferryDeviceMemcpyAsync(m.dev, m.host, m.bytes, nullptr) != ncclSuccess) {
    printf("FAIL device buffer of %zu bytes\n", m.bytes);
    std::abort();
  }
  gMirrors.push_back(m);
  return static_cast<T*>(m.dev);
}

bool pullMirrors() {
  bool ok = true;
  for (const Mirror& m : gMirrors)
    ok = ok && ferryDeviceMemcpyAsync(m.host, m.dev, m.bytes, nullptr) == ncclSuccess;
  ok = ok && ferryDeviceStreamSynchronize(nullptr) == ncclSuccess;
  for (const Mirror& m : gMirrors) ferryDeviceFree(m.dev);
  gMirrors.clear();
  if (!ok) printf("FAIL copying device buffers back\n");
  return ok;
}

bool callOk(ncclResult_t r, const std::string& what) {
  if (gDevice && !pullMirrors()) return false;
  if (r == ncclSuccess) return true;
  printf("FAIL %s: returned %s (%s)\n", what.c_str(), ncclGetErrorString(r), ncclGetLastError(nullptr));
  return false;
}

std::string desc(const Ctx& cx, const char* coll, size_t count, int root = -1) {
  char b[160];
  snprintf(b, sizeof(b), "%s count=%zu (%zu B) nranks=%d rank=%d%s", coll, count, count * 4, cx.nranks,
           cx.rank, root >= 0 ? (" root=" + std::to_string(root)).c_str() : "");
  return b;
}

bool report(bool ok, const std::string& what, bool quiet = false) {
  if (ok && !quiet) printf("OK %s\n", what.c_str());
  return ok;
}

bool caseBroadcast(const Ctx& cx, size_t c, int root) {
  std::string what = desc(cx, "Broadcast", c, root);
  auto send = makeBuf<float>(c), recv = makeBuf<float>(c);
  for (size_t i = 0; i < c; ++i) send[i] = mv(root, i);
  if (!callOk(ncclBroadcast(D(send), D(recv), c, ncclFloat32, root, cx.comm, nullptr), what)) return false;
  return report(check<float>(recv, 0, c, [&](size_t i) { return mv(root, i); }, c, what), what);
}

bool caseReduce(const Ctx& cx, size_t c, int root) {
  std::string what = desc(cx, "Reduce sum", c, root);
  auto send = makeBuf<float>(c), recv = makeBuf<float>(c);
  for (size_t i = 0; i < c; ++i) send[i] = sumIn(cx.rank, i);
  if (!callOk(ncclReduce(D(send), D(recv), c, ncclFloat32, ncclSum, root, cx.comm, nullptr), what))
    return false;
  // Non-root ranks' recvbuff must stay untouched.
  size_t n = cx.rank == root ? c : 0;
  return report(check<float>(recv, 0, n, [&](size_t i) { return sumOut(cx.nranks, i); }, n, what), what);
}

bool caseAllGather(const Ctx& cx, size_t m) {
  std::string what = desc(cx, "AllGather", m);
  auto send = makeBuf<float>(m), recv = makeBuf<float>(m * cx.nranks);
  for (size_t i = 0; i < m; ++i) send[i] = mv(cx.rank, i);
  if (!callOk(ncclAllGather(D(send), D(recv), m, ncclFloat32, cx.comm, nullptr), what)) return false;
  return report(check<float>(recv, 0, m * cx.nranks, [&](size_t k) { return mv(int(k / m), k % m); },
                             m * cx.nranks, what), what);
}

bool caseReduceScatter(const Ctx& cx, size_t m) {
  std::string what = desc(cx, "ReduceScatter sum", m);
  auto send = makeBuf<float>(m * cx.nranks), recv = makeBuf<float>(m);
  for (size_t j = 0; j < m * cx.nranks; ++j) send[j] = sumIn(cx.rank, j);
  if (!callOk(ncclReduceScatter(D(send), D(recv), m, ncclFloat32, ncclSum, cx.comm, nullptr), what))
    return false;
  size_t base = size_t(cx.rank) * m;
  return report(check<float>(recv, 0, m, [&](size_t i) { return sumOut(cx.nranks, base + i); }, m, what), what);
}

bool caseGather(const Ctx& cx, size_t m, int root) {
  std::string what = desc(cx, "Gather", m, root);
  auto send = makeBuf<float>(m), recv = makeBuf<float>(m * cx.nranks);
  for (size_t i = 0; i < m; ++i) send[i] = mv(cx.rank, i);
  if (!callOk(ncclGather(D(send), D(recv), m, ncclFloat32, root, cx.comm, nullptr), what)) return false;
  size_t n = cx.rank == root ? m * cx.nranks : 0;
  return report(check<float>(recv, 0, n, [&](size_t k) { return mv(int(k / m), k % m); }, n, what), what);
}

bool caseScatter(const Ctx& cx, size_t m, int root) {
  std::string what = desc(cx, "Scatter", m, root);
  auto send = makeBuf<float>(m * cx.nranks), recv = makeBuf<float>(m);
  for (size_t k = 0; k < m * cx.nranks; ++k) send[k] = mv(100 + int(k / m), k % m);
  if (!callOk(ncclScatter(D(send), D(recv), m, ncclFloat32, root, cx.comm, nullptr), what)) return false;
  return report(check<float>(recv, 0, m, [&](size_t i) { return mv(100 + cx.rank, i); }, m, what), what);
}

bool caseSendRecvRing(const Ctx& cx, size_t c) {
  std::string what = desc(cx, "Send/Recv ring (grouped)", c);
  int next = (cx.rank + 1) % cx.nranks, prev = (cx.rank + cx.nranks - 1) % cx.nranks;
  auto send = makeBuf<float>(c), recv = makeBuf<float>(c);
  for (size_t i = 0; i < c; ++i) send[i] = mv(cx.rank, i);
  ncclResult_t r = ncclGroupStart();
  if (r == ncclSuccess) r = ncclSend(D(send), c, ncclFloat32, next, cx.comm, nullptr);
  if (r == ncclSuccess) r = ncclRecv(D(recv), c, ncclFloat32, prev, cx.comm, nullptr);
  ncclResult_t e = ncclGroupEnd();
  if (!callOk(r != ncclSuccess ? r : e, what)) return false;
  return report(check<float>(recv, 0, c, [&](size_t i) { return mv(prev, i); }, c, what), what);
}

// AlltoAllv: rank s sends vcount(s, d) elements to d, 0 to 2m (some pairs
// send nothing), packed in destination order; mv(s*n+d, i) as AlltoAll.
size_t vcount(int s, int d, size_t m) { return m * size_t((s * 3 + d * 5) % 5) / 2; }

bool caseAlltoAllv(const Ctx& cx, size_t m) {
  std::string what = desc(cx, "AlltoAllv", m);
  const int n = cx.nranks;
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t st = 0, rt = 0;
  for (int p = 0; p < n; ++p) {
    sc[p] = vcount(cx.rank, p, m), sd[p] = st, st += sc[p];
    rc[p] = vcount(p, cx.rank, m), rd[p] = rt, rt += rc[p];
  }
  auto send = makeBuf<float>(st), recv = makeBuf<float>(rt);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < sc[p]; ++i) send[sd[p] + i] = mv(cx.rank * n + p, i);
  if (!callOk(ferryAlltoAllv(D(send), sc.data(), sd.data(), D(recv), rc.data(), rd.data(),
                             ncclFloat32, cx.comm, nullptr), what))
    return false;
  bool ok = true;
  for (int p = 0; p < n && ok; ++p)
    ok = check<float>(recv, rd[p], rc[p], [&](size_t i) { return mv(p * n + cx.rank, i); }, rt, what);
  return report(ok, what);
}

// A random Send/Recv pattern, the same on every rank (seeded by the size):
// each rank sends to 3 peers (itself possible) 1..c elements each, all in one
// group; a receiver posts one Recv per sender.
std::vector<std::vector<size_t>> randomPattern(int n, size_t c) {
  uint64_t x = 0x9e3779b97f4a7c15ull ^ c;
  auto next = [&] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  std::vector<std::vector<size_t>> cnt(n, std::vector<size_t>(n, 0));
  for (int s = 0; s < n; ++s)
    for (int k = 0; k < 3; ++k) cnt[s][next() % n] = 1 + next() % c;
  return cnt;
}

bool caseSendRecvRandom(const Ctx& cx, size_t c) {
  std::string what = desc(cx, "Send/Recv random pattern (grouped)", c);
  const int n = cx.nranks;
  auto cnt = randomPattern(n, c);
  std::vector<std::vector<float>> send(n), recv(n);
  ncclResult_t r = ncclGroupStart();
  for (int p = 0; p < n && r == ncclSuccess; ++p) {
    if (cnt[cx.rank][p]) {
      send[p] = makeBuf<float>(cnt[cx.rank][p]);
      for (size_t i = 0; i < cnt[cx.rank][p]; ++i) send[p][i] = mv(cx.rank * n + p, i);
      r = ncclSend(D(send[p]), cnt[cx.rank][p], ncclFloat32, p, cx.comm, nullptr);
    }
    if (r == ncclSuccess && cnt[p][cx.rank]) {
      recv[p] = makeBuf<float>(cnt[p][cx.rank]);
      r = ncclRecv(D(recv[p]), cnt[p][cx.rank], ncclFloat32, p, cx.comm, nullptr);
    }
  }
  ncclResult_t e = ncclGroupEnd();
  if (!callOk(r != ncclSuccess ? r : e, what)) return false;
  bool ok = true;
  for (int p = 0; p < n && ok; ++p) {
    size_t k = cnt[p][cx.rank];
    if (k) ok = check<float>(recv[p], 0, k, [&](size_t i) { return mv(p * n + cx.rank, i); }, k, what);
  }
  return report(ok, what);
}

// The MoE dispatch shape as torch's all_to_all_single issues it: one group
// with a Send to and a Recv from every rank (itself too, zero counts
// included), each block in its own buffer. With FERRY_P2P_RAIL=1 it runs as
// one rail exchange (src/comm/p2p_exchange.h).
bool caseSendRecvExchange(const Ctx& cx, size_t m) {
  std::string what = desc(cx, "Send/Recv full exchange (grouped)", m);
  const int n = cx.nranks;
  std::vector<std::vector<float>> send(n), recv(n);
  ncclResult_t r = ncclGroupStart();
  for (int p = 0; p < n && r == ncclSuccess; ++p) {
    size_t sc = vcount(cx.rank, p, m), rc = vcount(p, cx.rank, m);
    send[p] = makeBuf<float>(sc);
    for (size_t i = 0; i < sc; ++i) send[p][i] = mv(cx.rank * n + p, i);
    recv[p] = makeBuf<float>(rc);
    r = ncclSend(D(send[p]), sc, ncclFloat32, p, cx.comm, nullptr);
    if (r == ncclSuccess) r = ncclRecv(D(recv[p]), rc, ncclFloat32, p, cx.comm, nullptr);
  }
  ncclResult_t e = ncclGroupEnd();
  if (!callOk(r != ncclSuccess ? r : e, what)) return false;
  bool ok = true;
  for (int p = 0; p < n && ok; ++p) {
    size_t k = vcount(p, cx.rank, m);
    if (k) ok = check<float>(recv[p], 0, k, [&](size_t i) { return mv(p * n + cx.rank, i); }, k, what);
  }
  return report(ok, what);
}

// FERRY_CLUSTER_CASES=a,b,...: run only the cases of these collectives
// (exact names: AllReduce, Broadcast, Reduce, AllGather, ReduceScatter,
// AlltoAll, Gather, Scatter, SendRecvRing, AlltoAllv, SendRecvRandom,
// SendRecvExchange); unset:
// all of them.
bool wanted(const char* name) {
  const char* list = getenv("FERRY_CLUSTER_CASES");
  if (!list || !*list) return true;
  std::string l = std::string(",") + list + ",";
  return l.find(std::string(",") + name + ",") != std::string::npos;
}

// Bytes host h's ranks receive from other hosts under a count table.
long long intoHost(const Ctx& cx, const std::function<size_t(int, int)>& count) {
  long long b = 0;
  for (int s = 0; s < cx.nranks; ++s)
    for (int d = 0; d < cx.nranks; ++d)
      if (d / cx.perHost == cx.host && s / cx.perHost != cx.host) b += (long long)count(s, d) * 4;
  return b;
}

}  // namespace

void setDeviceMode(bool on) { gDevice = on; }

bool caseAlltoAll(const Ctx& cx, size_t m, bool quiet) {
  std::string what = desc(cx, "AlltoAll", m);
  int n = cx.nranks;
  auto send = makeBuf<float>(m * n), recv = makeBuf<float>(m * n);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < m; ++i) send[p * m + i] = mv(cx.rank * n + p, i);
  if (!callOk(ncclAlltoAll(D(send), D(recv), m, ncclFloat32, cx.comm, nullptr), what)) return false;
  return report(check<float>(recv, 0, m * n, [&](size_t k) { return mv(int(k / m) * n + cx.rank, k % m); },
                             m * n, what), what, quiet);
}

bool caseAllReduce(const Ctx& cx, size_t c, Red op, bool inPlace, bool quiet) {
  const char* name = op == Red::kSum ? "AllReduce sum float" : op == Red::kMax ? "AllReduce max float"
                                                                               : "AllReduce avg int32";
  std::string what = desc(cx, name, c) + (inPlace ? " in-place" : "");
  if (op == Red::kAvg) {
    auto send = makeBuf<int32_t>(c), recv = makeBuf<int32_t>(c);
    for (size_t i = 0; i < c; ++i) send[i] = avgIn(cx.nranks, cx.rank, i);
    auto& out = inPlace ? send : recv;
    if (!callOk(ncclAllReduce(D(send), D(out), c, ncclInt32, ncclAvg, cx.comm, nullptr), what)) return false;
    return report(check<int32_t>(out, 0, c, avgOut, c, what), what, quiet);
  }
  auto send = makeBuf<float>(c), recv = makeBuf<float>(c);
  for (size_t i = 0; i < c; ++i) send[i] = op == Red::kSum ? sumIn(cx.rank, i) : maxIn(cx.rank, i);
  auto& out = inPlace ? send : recv;
  ncclRedOp_t nop = op == Red::kSum ? ncclSum : ncclMax;
  if (!callOk(ncclAllReduce(D(send), D(out), c, ncclFloat32, nop, cx.comm, nullptr), what)) return false;
  int n = cx.nranks;
  std::function<float(size_t)> want = [&](size_t i) { return op == Red::kSum ? sumOut(n, i) : maxOut(n, i); };
  return report(check<float>(out, 0, c, want, c, what), what, quiet);
}

std::vector<CaseResult> runSize(const Ctx& cx, size_t c) {
  const int n = cx.nranks, H = cx.hosts, P = cx.perHost, h = cx.host;
  const size_t m = std::max<size_t>(1, c / size_t(n));
  const long long C = (long long)c * 4, M = (long long)m * 4;
  // Roots on different hosts: the last rank, the first rank of host 1, rank 0.
  const int rootLast = n - 1, rootH1 = H > 1 ? P : 0, rootFirst = 0;
  auto hostOf = [&](int r) { return r / P; };
  // Lower bounds on inter-host payload into host h (zero on a one-host cluster):
  // a reduction result needs the other hosts' C bytes; moved blocks that live
  // on other hosts must arrive once per host.
  auto lb = [&](long long v) { return H > 1 ? v : 0LL; };
  std::vector<CaseResult> out;
  auto add = [&](const char* name, const std::function<bool()>& run, long long minRx) {
    if (wanted(name)) out.push_back({run(), minRx});
  };
  add("AllReduce", [&] { return caseAllReduce(cx, c, Red::kSum, false); }, lb(C));
  add("AllReduce", [&] { return caseAllReduce(cx, c, Red::kSum, true); }, lb(C));
  add("AllReduce", [&] { return caseAllReduce(cx, c, Red::kMax, false); }, lb(C));
  add("AllReduce", [&] { return caseAllReduce(cx, c, Red::kAvg, false); }, lb(C));
  add("Broadcast", [&] { return caseBroadcast(cx, c, rootLast); }, lb(h != hostOf(rootLast) ? C : 0));
  add("Reduce", [&] { return caseReduce(cx, c, rootH1); }, lb(h == hostOf(rootH1) ? C : 0));
  add("AllGather", [&] { return caseAllGather(cx, m); }, lb((H - 1) * P * M));
  add("ReduceScatter", [&] { return caseReduceScatter(cx, m); }, lb(P * M));
  add("AlltoAll", [&] { return caseAlltoAll(cx, m); }, lb(P * (H - 1) * P * M));
  add("Gather", [&] { return caseGather(cx, m, rootLast); }, lb(h == hostOf(rootLast) ? (H - 1) * P * M : 0));
  add("Scatter", [&] { return caseScatter(cx, m, rootFirst); }, lb(h != hostOf(rootFirst) ? P * M : 0));
  add("SendRecvRing", [&] { return caseSendRecvRing(cx, c); }, lb(C));
  add("AlltoAllv", [&] { return caseAlltoAllv(cx, m); },
      intoHost(cx, [&](int s, int d) { return vcount(s, d, m); }));
  add("SendRecvExchange", [&] { return caseSendRecvExchange(cx, m); },
      intoHost(cx, [&](int s, int d) { return vcount(s, d, m); }));
  auto pattern = randomPattern(n, c);
  add("SendRecvRandom", [&] { return caseSendRecvRandom(cx, c); },
      intoHost(cx, [&](int s, int d) { return pattern[s][d]; }));
  return out;
}

}  // namespace ferry::cluster
