// Comm::buildView: the communicator's CommView (algorithms/comm_view.h),
// from one allgather of what each rank knows about its host and network, so
// every rank builds the identical view. Per host, the figures of its lowest
// rank count (ranks of a host read the same calibration anyway); across
// hosts the slowest figure counts, since a collective waits for its slowest
// link.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "algorithms/ring_order.h"
#include "comm/calibration.h"
#include "comm/comm.h"
#include "comm/host_id.h"
#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"

namespace ferry {
namespace {

// One rank's contribution, allgathered.
struct ViewInfo {
  uint64_t hostHash = 0;
  uint64_t machineHash = 0;  // ranks sharing it share the cores
  int32_t cores = 1;
  int32_t netDevices = 0;   // 0: no network set up
  int32_t sendDevice = -1;
  float netMbps = 0;        // 0: unknown
  float netLatencyUs = 0;   // 0: unknown
  int32_t netSoftware = 0;  // 1: the device has no hardware (TransportReport::software)
  float memcpyBytesPerUs = 0;
  float reduceBytesPerUs = 0;
  float stepLatencyUs = 0;
  float cachedMemcpyBytesPerUs = 0;
  float cachedReduceBytesPerUs = 0;
  float cacheBytes = 0;
  uint64_t fifoBytes = 0;   // smallest connection FIFO of this rank's transports (0: none)
  char nic[48] = {};        // the NIC of this rank's rail
};

constexpr double kDefaultNetMbps = 10000;      // when the device does not say
constexpr double kDefaultNetLatencyUs = 20;
// CPU per message and end: a slot handoff through shared memory; a network
// request (system calls on sockets). Measured on Ferry's development machine.
constexpr double kShmOverheadUs = 0.3;
constexpr double kNetOverheadUs = 5.0;
constexpr size_t kOversubscribedCmaThreshold = 65536;  // FERRY_CMA_THRESHOLD with ranks > cores

// The rank's NIC: its GPU rail's NIC when the topology has GPUs (device
// index = local rank), else the network device it sends on.
void setNic(ViewInfo* me, const std::vector<topo::Rail>& rails, int localRank, const std::string& netDev) {
  std::string nic = rails.empty() ? netDev : rails[localRank % rails.size()].nic;
  snprintf(me->nic, sizeof(me->nic), "%s", nic.c_str());
}

ViewInfo myInfo(const std::vector<std::unique_ptr<Transport>>& transports, uint64_t hostHash) {
  ViewInfo me;
  me.hostHash = hostHash;
  me.machineHash = machineHash();
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  me.cores = cores > 0 ? static_cast<int32_t>(cores) : 1;
  for (const auto& t : transports) {
    TransportReport r = t->report();
    if (r.active && r.fifoBytes > 0 && (me.fifoBytes == 0 || r.fifoBytes < me.fifoBytes))
      me.fifoBytes = r.fifoBytes;
    if (!r.active || r.devices <= 0) continue;
    me.netDevices = r.devices;
    me.sendDevice = r.sendDevice;
    me.netMbps = static_cast<float>(r.mbps);
    me.netLatencyUs = static_cast<float>(r.latencyUs);
    me.netSoftware = r.software ? 1 : 0;
    snprintf(me.nic, sizeof(me.nic), "%s", r.deviceName.c_str());
  }
  const HostCalibration& cal = hostCalibration();
  me.memcpyBytesPerUs = static_cast<float>(cal.memcpyBytesPerUs);
  me.reduceBytesPerUs = static_cast<float>(cal.reduceBytesPerUs);
  me.stepLatencyUs = static_cast<float>(cal.stepLatencyUs);
  me.cachedMemcpyBytesPerUs = static_cast<float>(cal.cachedMemcpyBytesPerUs);
  me.cachedReduceBytesPerUs = static_cast<float>(cal.cachedReduceBytesPerUs);
  me.cacheBytes = static_cast<float>(cal.cacheBytes);
  return me;
}

// Overrides in integer units: ns and MB/s (= bytes/us) or Mbit/s.
void applyOverrides(CommView* v) {
  using config::Param;
  if (int64_t ns = config::getInt(Param::kIntraLatNs); ns > 0) v->intra.latencyUs = ns / 1000.0;
  if (int64_t mbs = config::getInt(Param::kIntraBwMBs); mbs > 0) v->intra.bytesPerUs = double(mbs);
  if (int64_t ns = config::getInt(Param::kInterLatNs); ns > 0) v->inter.latencyUs = ns / 1000.0;
  if (int64_t mbit = config::getInt(Param::kInterBwMbits); mbit > 0) v->inter.bytesPerUs = mbit / 8.0;
  if (int64_t b = config::getInt(Param::kInterBurstBytes); b > 0) v->inter.burstBytes = double(b);
}

// A step must fit in half of the smallest FIFO any rank's connections have
// (FERRY_CHUNK_BYTES caps it), less the operation descriptor (op_check.h)
// the first piece of an operation carries, so rings and pairwise exchanges
// never wait for a slot their peer cannot free.
size_t chunkBytes(const std::vector<ViewInfo>& all) {
  int64_t chunk = config::getInt(config::Param::kChunkBytes);
  for (const ViewInfo& i : all)
    if (i.fifoBytes > 0) chunk = std::min<int64_t>(chunk, static_cast<int64_t>(i.fifoBytes / 2));
  return static_cast<size_t>(std::max<int64_t>(4096, chunk - 64));
}

// How many rings to build: one per rail (their inter-host hops then use
// different NICs), bounded as NCCL bounds its channels: NCCL_MAX_NCHANNELS
// lowers, then NCCL_MIN_NCHANNELS raises; railRings caps the result at 8
// and at what the hosts' sizes allow without two rings sharing a connection.
int wantedRings(int nRails) {
  using config::Param;
  int n = std::min(nRails, kMaxRings);
  if (int64_t mx = config::getInt(Param::kMaxNchannels); mx > 0)
    n = static_cast<int>(std::min<int64_t>(n, mx));
  if (int64_t mn = config::getInt(Param::kMinNchannels); mn > 0)
    n = static_cast<int>(std::max<int64_t>(n, std::min<int64_t>(mn, kMaxRings)));
  return std::max(n, 1);
}

}  // namespace

// One line per rank, and the rings on rank 0 as NCCL prints its channels
// (ferry-topo --comm shows the whole view).
void Comm::logView() const {
  const CommView& v = view_;
  FERRY_INFO(log::kInit | log::kTuning, "View: %d ranks on %d host(s), %d rail(s), %zu ring(s)",
             v.nranks, v.nHosts(), v.nRails, v.rings.size());
  if (rank_ != 0) return;
  for (size_t c = 0; c < v.rings.size(); ++c) {
    std::string order;
    for (int r : v.rings[c]) order += " " + std::to_string(r);
    FERRY_INFO(log::kInit, "Ring %02zu/%02zu :%s", c, v.rings.size(), order.c_str());
  }
}

Status Comm::buildView() {
  std::vector<ViewInfo> all(nranks_);
  all[rank_] = myInfo(transports_, peers_[rank_].hostHash);
  int localRank = 0;
  for (int r = 0; r < rank_; ++r) localRank += peers_[r].hostHash == peers_[rank_].hostHash;
  setNic(&all[rank_], rails_, localRank, all[rank_].nic);
  FERRY_TRY(bootstrap_->allGather(all.data(), sizeof(ViewInfo)));
  std::vector<uint64_t> hostOf;
  for (const ViewInfo& i : all) hostOf.push_back(i.hostHash);
  CommView v = makeView(hostOf, chunkBytes(all), false);

  v.nRails = 1;
  double cachedCopy = 1e30, cachedReduce = 1e30, cache = 1e30;
  double memcpy = 1e30, reduce = 1e30, step = 0, mbps = 1e30, netLat = 0;
  bool netKnown = false, anyNet = false, software = true;
  for (const auto& host : v.hostRanks) {
    const ViewInfo& first = all[host[0]];
    memcpy = std::min<double>(memcpy, first.memcpyBytesPerUs);
    cachedCopy = std::min<double>(cachedCopy, first.cachedMemcpyBytesPerUs);
    cachedReduce = std::min<double>(cachedReduce, first.cachedReduceBytesPerUs);
    cache = std::min<double>(cache, first.cacheBytes);
    reduce = std::min<double>(reduce, first.reduceBytesPerUs);
    step = std::max<double>(step, first.stepLatencyUs);
  }
  std::map<uint64_t, int> perMachine;
  for (const ViewInfo& i : all) perMachine[i.machineHash]++;
  for (const ViewInfo& i : all)
    v.oversubscription = std::max(v.oversubscription, double(perMachine[i.machineHash]) / std::max(1, i.cores));
  for (int r = 0; r < nranks_; ++r) {
    const ViewInfo& i = all[r];
    v.railOf[r] = i.netDevices > 0 ? v.localRankOf[r] % i.netDevices : 0;
    v.nicOf[r] = std::string(i.nic, strnlen(i.nic, sizeof(i.nic)));
    v.nRails = std::max(v.nRails, i.netDevices);
    if (i.netMbps > 0) mbps = std::min<double>(mbps, i.netMbps), netKnown = true;
    netLat = std::max<double>(netLat, i.netLatencyUs);
    if (i.netDevices > 0) {
      anyNet = true;
      software = software && i.netSoftware;
    }
  }
  v.self = LinkCost{0.1, memcpy, 0.0};
  // A message between two ranks of a host is copied twice (into the FIFO
  // slot and out) or read by cross-memory attach at about half memcpy speed.
  v.intra = LinkCost{step, memcpy / 2, kShmOverheadUs};
  v.inter = LinkCost{netLat > 0 ? netLat : kDefaultNetLatencyUs,
                     (netKnown ? mbps : kDefaultNetMbps) / 8.0, kNetOverheadUs};
  // Every rank's device is software (namespaces of one machine): no NIC to
  // share. One real NIC anywhere and the NIC model holds.
  v.inter.software = anyNet && software;
  v.reduceBytesPerUs = reduce;
  v.cachedCopyBytesPerUs = cachedCopy;
  v.cachedReduceBytesPerUs = cachedReduce;
  v.cacheBytes = cache;
  // The direct reduce-scatter/all-gather reads peers' memory and makes each
  // rank wait for all others twice a round: only with a core per rank.
  v.allLocal = v.nHosts() == 1 && nranks_ > 1 && !config::getBool(config::Param::kShmDisable) &&
               execOptions_.allowRefs && v.oversubscription <= 1.0;
  // Without shared memory, ranks of a host talk over the network.
  if (config::getBool(config::Param::kShmDisable)) v.intra.latencyUs = std::max(step, v.inter.latencyUs);
  applyOverrides(&v);
  setRings(&v, wantedRings(v.nRails));
  view_ = std::move(v);
  logView();
  // Waits yield early when this machine's ranks outnumber its cores.
  if (perMachine[all[rank_].machineHash] > all[rank_].cores) Backoff::setOversubscribed(true);
  // By value, a piece costs two copies on two cores at once; by CMA, one
  // slower kernel copy. With ranks sharing cores the copies no longer run
  // side by side: 4 ranks on 2 cores lost up to 1.3-2.6x at 256 KiB-1 MiB
  // with the 4 MiB threshold in a slow phase (Scatter, AlltoAll, SendRecv),
  // and won 0.45-0.8x in a fast one (perf/README.md): this threshold is
  // way 0 of each operation's own choice (exec/ref_choice.h).
  if (!config::isSet(config::Param::kCmaThreshold) && view_.oversubscription > 1.0)
    execOptions_.refThreshold = kOversubscribedCmaThreshold;
  return Status::ok();
}

}  // namespace ferry
