// NodeSync: barriers among the ranks of one host through shared memory.
//
// Every rank owns one page (a memfd) holding the number of barriers it has
// reached and a descriptor of the operation it is about to run; every rank
// maps every other rank's page. A barrier is "publish my count, wait until
// every count has reached it": no messages, no FIFO, a few cache lines.
// Symmetric collectives (algorithms/symmetric.cc) order their loads and
// stores on peers' windows with it, and compare descriptors at the first
// barrier of each operation so ranks that disagree fail instead of reading
// the wrong bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "accel/host_flag.h"
#include "core/status.h"
#include "mem/shared_alloc.h"
#include "transports/transport.h"

namespace ferry::mem {

// What a rank says about the symmetric operation it runs (compared at the
// operation's first barrier).
struct SymDescriptor {
  uint64_t collSeq = 0;
  uint64_t count = 0;
  uint64_t inOffset = 0, outOffset = 0;  // offsets into the windows
  uint32_t inWindow = 0, outWindow = 0;  // window ids (registration order)
  uint8_t kind = 0, dtype = 0, op = 0, inPlace = 0;
  int32_t root = -1;
  bool operator==(const SymDescriptor&) const = default;
};

class NodeSync {
 public:
  ~NodeSync();
  // Collective over `ex`: creates this rank's page and maps every other
  // rank's (all must be on this host and reachable).
  static Result<std::unique_ptr<NodeSync>> create(PeerExchange& ex, int rank, int nranks,
                                                  const std::vector<PeerInfo>& peers);

  // Barrier: arrive() once, then passed() until true.
  void arrive();
  bool passed() const;
  // Ranks that have not reached the current barrier yet.
  void waitingOn(std::vector<int>* out) const;

  // The descriptor of my next operation (before its first arrive()), and
  // the first rank whose descriptor differs from mine after that barrier.
  void publish(const SymDescriptor& d);
  int firstMismatch(SymDescriptor* theirs) const;

  // Device barriers (comm/device_direct.h) are stream work: each rank's
  // stream raises its own flag to the barrier's number and waits for every
  // rank's flag to reach it. Numbers are handed out when the work is
  // enqueued, in call order, which every rank shares; the flags are apart
  // from the host barriers', which run at call time.
  uint32_t nextDeviceBarrier() { return ++devGen_; }
  accel::HostFlag* deviceFlag(int rank) const { return &pages_[rank]->devArrived; }
  // The device operations' own descriptors (their sequence numbers count
  // device operations), published and compared from stream work, apart
  // from the host barriers' (which run at call time).
  uint64_t nextDeviceOp() { return ++devOps_; }
  void publishDevice(const SymDescriptor& d) { own_->devDesc = d; }
  int firstDeviceMismatch(SymDescriptor* theirs) const;
  int nranks() const { return static_cast<int>(pages_.size()); }

 private:
  struct alignas(64) Page {
    std::atomic<uint64_t> arrived;
    char pad[56];
    SymDescriptor desc;
    alignas(64) accel::HostFlag devArrived;
    SymDescriptor devDesc;
  };
  NodeSync() = default;
  // The first rank whose descriptor `field` differs from mine, or -1.
  int firstMismatch(SymDescriptor Page::*field, SymDescriptor* theirs) const;

  Page* own_ = nullptr;       // from allocShared
  std::vector<Page*> pages_;  // by rank (own_ for this rank)
  std::vector<PeerMapping> maps_;
  uint64_t gen_ = 0;
  uint32_t devGen_ = 0;
  uint64_t devOps_ = 0;
};

}  // namespace ferry::mem
