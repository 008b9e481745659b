// CommView: what one communicator looks like, the input of every algorithm
// and of the choice between them (tuner.h).
//
// Built once when the communicator is created (src/comm/comm_view_build.cc)
// from information every rank allgathered, so every rank holds the same view
// and decides the same way. It is immutable afterwards; a CollArgs carries
// only what changes per call.
//
// Hosts are numbered in order of their lowest rank; a host's ranks are
// listed ascending, and a rank's local rank is its index there. Rails: on a
// host without GPUs a rank's "device index" is its local rank, and its rail
// is that index modulo the host's number of network devices (the NIC the
// network transport sends from).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry {

// One level of the machine as the cost model sees it (LogGP-like): a message
// of b bytes over one hop arrives latencyUs + b / bytesPerUs after it is
// sent, and each message costs its sender and receiver overheadUs of CPU
// (posting, matching, system calls), which serialises when a rank handles
// many messages at once. Reductions cost b / reduceBytesPerUs more.
struct LinkCost {
  double latencyUs = 1.0;
  double bytesPerUs = 1000.0;  // 1 GB/s
  double overheadUs = 0.2;
  // A rate-limited link (a token bucket: tc tbf, a cloud VM's bandwidth cap)
  // saves up to burstBytes of sending while it idles and then sends them at
  // full speed; 0 for a wire, which loses the time it idles.
  double burstBytes = 0;
  // A link no NIC serialises (a veth or bridge between network namespaces,
  // loopback): the kernel copies each rank's traffic on that rank's CPU, so
  // ranks of a host that cross at once do not share a NIC (cost::nics).
  bool software = false;
};

enum class Level : uint8_t { kSelf, kIntraHost, kInterHost };
const char* levelName(Level l);

struct CommView {
  int nranks = 1;
  std::vector<int> hostOf;                   // rank -> host index
  std::vector<int> localRankOf;              // rank -> index within its host
  std::vector<std::vector<int>> hostRanks;   // host -> its ranks, ascending
  std::vector<int> railOf;                   // rank -> rail (NIC index on its host)
  std::vector<std::string> nicOf;            // rank -> its rail's NIC name ("" unknown)
  int nRails = 1;                            // most network devices any host uses

  LinkCost self;                             // copies within a rank
  LinkCost intra;                            // between two ranks of one host
  LinkCost inter;                            // between hosts, one rail
  double reduceBytesPerUs = 2000.0;          // host reduction kernel speed
  // Copies and reductions of data that stays in a core's cache run several
  // times faster (here 40 vs 14 GB/s memcpy): atSize() uses these figures
  // for messages whose working set fits in cacheBytes.
  double cachedCopyBytesPerUs = 0;           // 0: no cached figures
  double cachedReduceBytesPerUs = 0;
  double cacheBytes = 0;
  // Ranks on the busiest machine divided by its cores (>1: ranks share
  // cores, each wait costs a scheduling round trip; the cost model uses it).
  // A machine is a running kernel: "hosts" made of network namespaces or
  // NCCL_HOSTID on one machine share its cores.
  double oversubscription = 1.0;

  // Largest piece one step may carry so a round fits in the smallest FIFO
  // of the connections (half its bytes, less the operation descriptor).
  size_t chunkBytes = 0;
  // One host, shared memory with peer reads allowed, a core per rank.
  bool allLocal = false;
  // The rings (ring position -> rank, hosts contiguous), one per rail on
  // multi-host communicators: ring c leaves every host from local rank c
  // and no two share a (peer, direction) pair (ring_order.h). Never empty
  // in a built view; ringOrder is rings[0], what single-ring algorithms use.
  std::vector<std::vector<int>> rings;
  std::vector<int> ringOrder;

  int nHosts() const { return static_cast<int>(hostRanks.size()); }
  bool sameHost(int a, int b) const { return hostOf[a] == hostOf[b]; }
  // The level a message between ranks a and b crosses.
  Level level(int a, int b) const {
    return a == b ? Level::kSelf : sameHost(a, b) ? Level::kIntraHost : Level::kInterHost;
  }
  const LinkCost& link(Level l) const {
    return l == Level::kSelf ? self : l == Level::kIntraHost ? intra : inter;
  }
  // Every host has the same number of ranks.
  bool uniformHosts() const;
  // This view for a call that touches `bytes` per rank: when that working
  // set (input and output) fits in the cache and no two ranks share a core,
  // copies within a host and reductions run at the cached speeds.
  CommView atSize(double bytes) const;
  // The slowest level any two ranks of this communicator cross.
  const LinkCost& slowest() const { return nHosts() > 1 ? inter : nranks > 1 ? intra : self; }
};

// A view of `nranks` ranks placed on hosts by `hostOf` (any labels; renumbered
// in order of first appearance), with default costs. For tests and tools;
// communicators fill the costs from calibration and the network. nRails is
// the most ranks any host has (a NIC per rank), and the rings follow it.
CommView makeView(const std::vector<uint64_t>& hostOf, size_t chunkBytes = 0, bool allLocal = false);

// Rebuilds v->rings (and ringOrder) for at most `wanted` rings
// (railRings in ring_order.h), e.g. after nRails changed.
void setRings(CommView* v, int wanted);

// The view as JSON (one object, keys in a fixed order) and as a table for
// people; `calibration` names where the host figures came from ("" omits it).
std::string viewJson(const CommView& v, const std::string& calibration = "");
std::string viewTable(const CommView& v, const std::string& calibration = "");

}  // namespace ferry
