// Shared-memory transport between processes of one node (equal hostHash).
//
// Each pair of ranks shares one segment (segment.h) with a byte ring per
// direction. Small pieces are copied through the ring, each a record of
// whole line pairs (an 8-byte piece is one pair); large pieces from
// stable user memory travel as references that the receiver copies straight
// out of the sender's address space with cross-memory attach
// (process_vm_readv), so large messages pay one copy, not two. CMA is probed
// once per pair and skipped when the kernel refuses it or NCCL_P2P_DISABLE=1.
// A reference into ncclMemAlloc memory (a memfd) is better still: the
// receiver maps that allocation once (cached per allocation) and reads the
// piece in place at memcpy speed, as if it had arrived in a slot.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "mem/shared_alloc.h"

#include "transports/shm/segment.h"
#include "transports/transport.h"

namespace ferry::shm {

class ShmConnection : public Connection {
 public:
  ShmConnection(void* base, size_t bytes, int side, int peerRank, bool allowRefs, bool created,
                std::string name);
  ~ShmConnection() override;

  Status trySend(SendSlot* out) override;
  Status commitSend(size_t bytes) override;
  bool supportsRef() const override;
  Status sendRef(const void* src, size_t bytes, bool* accepted) override;
  Status tryRecv(RecvPiece* out) override;
  Status readRef(const RecvPiece& piece, size_t offset, void* dst, size_t bytes) override;
  Status releaseRecv() override;
  bool sendsDrained() override;
  bool sendsConsumed() override;
  bool needsPush() const override { return false; }
  void markFailed() override;
  bool stepClose(bool* moved) override;
  Status health() override { return peerFailed(); }
  bool outlivesPeer() override;
  std::string describe() const override;

 private:
  // Where the next record goes: `skip` bytes up to the ring's end first (a
  // record never straddles it), then `cap` payload bytes at most.
  struct Placement {
    size_t skip = 0;
    size_t cap = 0;
    bool near = false;  // payload in the header's line (kInlineNear)
  };
  // False when the ring lacks room for a record of minPayload bytes.
  bool place(size_t minPayload, Placement* p);
  RecordHeader* sendRecord(size_t skip) const;
  // Stamps the record at the placed position (and the skip before it).
  void publish(const Placement& p, size_t payload, uint32_t kind);
  void probePeer();
  void showHead();  // publish recvHead_ to the producer
  uint64_t stampAt(uint64_t pos) const { return (pos + 1) ^ key_; }
  // Nothing at the expected record: fine, unless the producer's tail says
  // that record was published (checked every kTailCheckEvery empty polls).
  Status nothingYet(const RecordHeader* h);
  Status peerFailed() const;
  Status badRecord(const RecordHeader* h) const;
  // The peer's allocation named by a kSharedRef record, mapped here; null
  // when it cannot be mapped (the piece is then read by CMA).
  const char* mapped(const RefFields* r);

  SegmentHeader* hdr_;
  size_t bytes_;
  int side_;
  int peer_;
  bool allowRefs_;
  bool created_;  // this side created the segment (and unlinks it if the peer never came)
  std::string name_;
  uint32_t slots_, slotBytes_;
  size_t ring_;          // bytes of each direction's ring
  RingControl* out_;     // we produce
  RingControl* in_;      // we consume
  char* outRing_;
  char* inRing_;
  Placement pending_;    // trySend's placement, used by commitSend
  uint64_t sendTail_ = 0, sendHeadSeen_ = 0;  // absolute byte positions
  uint64_t recvHead_ = 0;
  uint64_t recvHeadShown_ = 0;  // what in_->head says (kHeadBatch)
  uint64_t key_;                // the segment's stamp key
  uint32_t emptyPolls_ = 0;     // since the last tail check (tryRecv)
  uint64_t refsEnd_ = 0;        // sendTail_ after our last reference (sendsDrained)
  bool recvIsRef_ = false;      // the record tryRecv showed refers to the producer's memory
  size_t sendPos_ = 0, recvPos_ = 0;  // the same modulo ring_ (no division per piece)
  size_t recvLen_ = 0;   // bytes of the record tryRecv showed
  size_t streamFrom_;    // FERRY_SHM_STREAM_BYTES (SendSlot::streamFrom)
  bool probed_ = false;
  bool outTouched_ = false, inTouched_ = false;  // mem::touchPages'd at first use
  mutable bool refsOk_ = false;
  std::map<uint64_t, mem::PeerMapping> maps_;  // allocId -> mapping (bounded)
  bool mapFailed_ = false;                     // stop trying after the first failure
};

class ShmTransport : public Transport {
 public:
  const char* name() const override { return "shm"; }
  Status setup(const CommContext& ctx, PeerInfo* self) override;
  bool canConnect(const CommContext& ctx, const PeerInfo& self, const PeerInfo& peer) const override;
  Result<std::unique_ptr<Connection>> connect(const CommContext& ctx, int peer) override;
  TransportReport report() const override;
};

}  // namespace ferry::shm
