#include "tests/soak/soak_ops.h"

#include <dirent.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

namespace ferry::soak {
namespace {

using mp::RedCase;
using mp::TestOp;

const ncclDataType_t kMoveTypes[] = {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64,
                                     ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};

const char* kindName(Kind k) {
  static const char* names[] = {"AllReduce", "Reduce",   "ReduceScatter", "Broadcast",        "AllGather",
                                "AlltoAll",  "Gather",   "Scatter",       "SendRecvRing",     "SendRecvAllPairs",
                                "GroupedAllReduce"};
  return names[static_cast<int>(k)];
}

bool perRank(Kind k) {
  return k == Kind::kReduceScatter || k == Kind::kAllGather || k == Kind::kAlltoAll || k == Kind::kGather ||
         k == Kind::kScatter || k == Kind::kSendRecvAllPairs;
}

// A reduction whose exact result every rank can predict (mp_util.h).
RedCase pickReduction(std::mt19937_64& g, int nranks) {
  for (;;) {
    ncclDataType_t dt = kMoveTypes[g() % std::size(kMoveTypes)];
    TestOp op = mp::kAllOps[g() % std::size(mp::kAllOps)];
    RedCase c{dt, op, nranks};
    if (mp::redCaseExact(c)) return c;
  }
}

}  // namespace

Op makeOp(uint64_t seed, uint64_t index, int nranks) {
  std::mt19937_64 g(seed * 0x9e3779b97f4a7c15ull + index);
  Op op{};
  op.kind = static_cast<Kind>(g() % static_cast<int>(Kind::kCount));
  op.red = pickReduction(g, nranks);
  op.dt = kMoveTypes[g() % std::size(kMoveTypes)];
  bool reduction = op.kind == Kind::kAllReduce || op.kind == Kind::kReduce || op.kind == Kind::kReduceScatter ||
                   op.kind == Kind::kGroupedAllReduce;
  size_t elem = mp::dtypeSize(reduction ? op.red.dt : op.dt);
  double bytes = g() % 50 == 0 ? 0.0 : std::exp2(std::uniform_real_distribution<double>(0, 24)(g));
  op.count = static_cast<size_t>(bytes / elem);
  if (perRank(op.kind)) op.count /= static_cast<size_t>(nranks);
  if (op.kind == Kind::kGroupedAllReduce) op.count /= 4;
  op.root = static_cast<int>(g() % static_cast<uint64_t>(nranks));
  op.inPlace = g() % 2 == 0;
  op.groupSize = 2 + static_cast<int>(g() % 3);
  return op;
}

std::string describe(const Op& op) {
  char s[200];
  snprintf(s, sizeof(s), "%s count %zu %s%s root %d%s", kindName(op.kind), op.count,
           mp::dtypeName(op.kind == Kind::kAllReduce || op.kind == Kind::kReduce ||
                                 op.kind == Kind::kReduceScatter || op.kind == Kind::kGroupedAllReduce
                             ? op.red.dt
                             : op.dt),
           op.kind == Kind::kAllReduce || op.kind == Kind::kReduce || op.kind == Kind::kReduceScatter
               ? (std::string(" ") + mp::opName(op.red.op)).c_str()
               : "",
           op.root, op.inPlace ? " in place" : "");
  return s;
}

namespace {

// `groupSize` AllReduces (int32 sum) of distinct buffers in one group;
// buffer j of rank r holds r + j + 1 everywhere.
int groupedAllReduce(const mp::Rank& me, size_t count, int groupSize) {
  std::vector<std::unique_ptr<mp::HostBuf>> bufs;
  for (int j = 0; j < groupSize; ++j) {
    bufs.push_back(std::make_unique<mp::HostBuf>(ncclInt32, count));
    bufs.back()->fill(double(me.rank + j + 1));
  }
  MP_NCCL(ncclGroupStart());
  for (auto& b : bufs) MP_NCCL(ncclAllReduce(b->data(), b->data(), count, ncclInt32, ncclSum, me.comm, nullptr));
  MP_NCCL(ncclGroupEnd());
  for (int j = 0; j < groupSize; ++j) {
    double expect = me.nranks * (me.nranks + 1) / 2.0 + double(j) * me.nranks;
    MP_CHECK(mp::checkBuf(*bufs[j], 0, count, [&](size_t) { return expect; }, "grouped AllReduce"),
             "grouped AllReduce %d of %d, count %zu", j, groupSize, count);
  }
  return 0;
}

}  // namespace

int runOp(const mp::Rank& me, const Op& op) {
  switch (op.kind) {
    case Kind::kAllReduce: return mp::caseAllReduce(me, op.red, op.count, op.inPlace);
    case Kind::kReduce: return mp::caseReduce(me, op.red, op.count, op.root, op.inPlace);
    case Kind::kReduceScatter: return mp::caseReduceScatter(me, op.red, op.count, op.inPlace);
    case Kind::kBroadcast: return mp::caseBroadcast(me, op.dt, op.count, op.root, op.inPlace);
    case Kind::kAllGather: return mp::caseAllGather(me, op.dt, op.count, op.inPlace);
    case Kind::kAlltoAll: return mp::caseAlltoAll(me, op.dt, op.count);
    case Kind::kGather: return mp::caseGather(me, op.dt, op.count, op.root, op.inPlace);
    case Kind::kScatter: return mp::caseScatter(me, op.dt, op.count, op.root, op.inPlace);
    case Kind::kSendRecvRing: return mp::caseSendRecvRing(me, op.dt, op.count);
    case Kind::kSendRecvAllPairs: return mp::caseSendRecvAllPairs(me, op.dt, op.count);
    case Kind::kGroupedAllReduce: return groupedAllReduce(me, op.count, op.groupSize);
    case Kind::kCount: break;
  }
  return 1;
}

int openFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
    n -= 3;  // ".", ".." and the directory's own descriptor
  }
  return n;
}

long rssKiB() {
  long pages = 0, resident = 0;
  if (FILE* f = fopen("/proc/self/statm", "r")) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

}  // namespace ferry::soak
