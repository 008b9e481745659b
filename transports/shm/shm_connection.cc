#include <sys/mman.h>
#include <sys/uio.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/config.h"
#include "core/log.h"
#include "transports/shm/shm.h"

namespace ferry::shm {

ShmConnection::ShmConnection(void* base, size_t bytes, int side, int peerRank, bool allowRefs,
                             bool created, std::string name)
    : hdr_(static_cast<SegmentHeader*>(base)), bytes_(bytes), side_(side), peer_(peerRank),
      allowRefs_(allowRefs), created_(created), name_(std::move(name)), slots_(hdr_->slots),
      slotBytes_(hdr_->slotBytes), ring_(ringBytes(slots_, slotBytes_)), key_(hdr_->stampKey),
      streamFrom_(static_cast<size_t>(
          std::max<int64_t>(0, config::getInt(config::Param::kShmStreamBytes)))) {
  out_ = ringControl(base, side_, slots_, slotBytes_);
  in_ = ringControl(base, 1 - side_, slots_, slotBytes_);
  outRing_ = ringData(out_);
  inRing_ = ringData(in_);
}

ShmConnection::~ShmConnection() {
  // The attacher unlinks as soon as it maps; this covers a peer that never came.
  if (created_ && hdr_->attached.load(std::memory_order_acquire) == 0) shm_unlink(name_.c_str());
  munmap(hdr_, bytes_);
}

// Why the peer failed is on the host's failure board (src/comm/fail_board.h),
// which the communicator reads when a wait fails; the flag only wakes us.
Status ShmConnection::peerFailed() const {
  if (hdr_->failed[1 - side_].load(std::memory_order_acquire))
    return remoteError("rank " + std::to_string(peer_) + " reported an error (shm " + name_ + ")");
  return Status::ok();
}

// Each ring's pages are read once by each side at its first use of that
// direction: with the page tables filled (MAP_POPULATE) a process' first
// access to each page still cost ~10 us here, so a 2-rank 8 B SendRecv ran
// 1.0-1.2 us for its first ~8000 operations (a lap of the 1 MiB ring) and
// 0.45 after; touched, 0.45 from the start (perf/README.md, "First access
// to shared pages"). At first use, not when mapped: most pairs of a large
// communicator never talk (a ring uses two of each rank's peers).
bool ShmConnection::place(size_t minPayload, Placement* p) {
  if (!outTouched_) {
    mem::touchPages(outRing_, ring_);
    outTouched_ = true;
  }
  size_t toEnd = ring_ - sendPos_;
  p->skip = toEnd < recordBytes(minPayload) ? toEnd : 0;
  size_t contiguous = p->skip ? ring_ : toEnd;
  size_t need = p->skip + recordBytes(minPayload);
  size_t free = ring_ - (sendTail_ - sendHeadSeen_);
  if (free < need) {
    sendHeadSeen_ = out_->head.load(std::memory_order_acquire);
    free = ring_ - (sendTail_ - sendHeadSeen_);
    if (free < need) return false;
  }
  size_t room = std::min(contiguous, free - p->skip) / kRecordAlign * kRecordAlign;
  p->cap = std::min<size_t>(slotBytes_, room - kPayloadOffset);
  return true;
}

RecordHeader* ShmConnection::sendRecord(size_t skip) const {
  return reinterpret_cast<RecordHeader*>(outRing_ + (skip ? 0 : sendPos_));
}

// Ask for the line the next record goes to in the state a write needs,
// now, while this rank goes back to its caller. A consumer that keeps up
// polls each record's line before the record is written; the write then
// waits for ownership of it, and every later store waits behind that one
// (stores leave in order): a 2-rank 8 B Broadcast root on another core
// complex than its receiver waited so on every piece (0.17-0.21 us per op
// without this, 0.09-0.12 with it, Open MPI 0.11; in the fast state 0.05-0.06
// either way). The consumer polls that line only after taking the record
// before it, so the next write usually finds the line still ours.
namespace {
#if defined(__x86_64__)
// PREFETCHW is not part of baseline x86-64: CPUs that do not report it
// (CPUID 0x80000001 ECX bit 8, as Linux's own prefetchw checks) are not
// promised to ignore it, so it is only issued where reported.
bool cpuHasPrefetchw() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8)) != 0;
}
const bool kHasPrefetchw = cpuHasPrefetchw();
#endif

inline void claimLine(const void* p) {
#if defined(__x86_64__)
  if (kHasPrefetchw) asm volatile("prefetchw (%0)" ::"r"(p));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}
}  // namespace

// Stamp the record, then the skip before it (the consumer follows a skip
// only to a record already written), then publish the tail. Each stamp is
// stored last in its record, with release: the consumer that sees it sees
// the record.
void ShmConnection::publish(const Placement& p, size_t payload, uint32_t kind) {
  uint64_t at = sendTail_ + p.skip;
  size_t len = kind == kInline || kind == kInlineNear ? recordBytes(payload) : kRecordAlign;
  size_t end = (p.skip ? 0 : sendPos_) + len;  // where the next record goes
  if (end == ring_) end = 0;
  RecordHeader* h = sendRecord(p.skip);
  h->size = static_cast<uint32_t>(payload);
  h->kind = kind;
  h->stamp.store(stampAt(at), std::memory_order_release);
  if (p.skip) {
    RecordHeader* s = sendRecord(0);
    s->size = 0;
    s->kind = kSkip;
    s->stamp.store(stampAt(sendTail_), std::memory_order_release);
  }
  sendTail_ = at + len;
  sendPos_ = end;
  out_->tail.store(sendTail_, std::memory_order_release);
  if (ring_ - (sendTail_ - sendHeadSeen_) >= kRecordAlign) claimLine(outRing_ + sendPos_);
}

// A piece the caller says is small starts right after the header: one of
// up to 48 bytes then shares the header's line, and the consumer reads one
// line per piece, not two (2-rank 8 B, 9 interleaved pairs: Broadcast 0.29
// -> 0.26 us, SendRecv 0.80 -> 0.66); up to kNearHint, a line fewer.
Status ShmConnection::trySend(SendSlot* out) {
  size_t hint = out->hint;
  *out = SendSlot{};
  if (!place(kMinPayload, &pending_)) return peerFailed();
  pending_.near = hint > 0 && hint <= kNearHint;
  if (pending_.near && hint <= kNearPayload) pending_.cap = kNearPayload;  // in the header's line
  out->data = reinterpret_cast<char*>(sendRecord(pending_.skip)) +
              (pending_.near ? kRecordHeader : kPayloadOffset);
  out->capacity = pending_.cap;
  out->streamFrom = pending_.near ? 0 : streamFrom_;
  return Status::ok();
}

Status ShmConnection::commitSend(size_t bytes) {
  if (bytes > pending_.cap)
    return internalError("shm: committed " + std::to_string(bytes) + " bytes into a slot of " +
                         std::to_string(pending_.cap));
  publish(pending_, bytes, pending_.near ? kInlineNear : kInline);
  return Status::ok();
}

// The peer can read our memory once its probe of us succeeded.
bool ShmConnection::supportsRef() const {
  if (!allowRefs_) return false;
  if (!refsOk_) refsOk_ = hdr_->canRead[1 - side_].load(std::memory_order_acquire) == 1;
  return refsOk_;
}

Status ShmConnection::sendRef(const void* src, size_t bytes, bool* accepted) {
  *accepted = false;
  if (bytes > UINT32_MAX) return internalError("shm: reference of " + std::to_string(bytes) + " bytes");
  Placement p;
  if (!place(sizeof(RefFields), &p)) return peerFailed();
  auto* r = reinterpret_cast<RefFields*>(reinterpret_cast<char*>(sendRecord(p.skip)) + kRecordHeader);
  uint32_t kind = kRef;
  r->addr = reinterpret_cast<uint64_t>(src);
  mem::SharedRange range;
  if (mem::lookupShared(src, bytes, &range)) {
    kind = kSharedRef;
    r->fd = static_cast<uint64_t>(range.fd);
    r->allocId = range.id;
    r->fileBytes = range.allocBytes;
    r->fileOffset = range.fileOffset;
  }
  publish(p, bytes, kind);
  refsEnd_ = sendTail_;
  *accepted = true;
  return Status::ok();
}

// Probe once whether process_vm_readv may read the peer (ptrace rules,
// seccomp and containers can forbid it); the peer only sends references
// after it sees our "yes".
void ShmConnection::probePeer() {
  if (probed_ || !allowRefs_) return;
  if (hdr_->attached.load(std::memory_order_acquire) == 0) return;
  uint64_t addr = hdr_->probeAddr[1 - side_];
  if (addr == 0) return;
  probed_ = true;
  uint64_t value = 0;
  iovec local{&value, sizeof(value)};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(value)};
  ssize_t n = process_vm_readv(hdr_->pid[1 - side_], &local, 1, &remote, 1, 0);
  bool ok = n == static_cast<ssize_t>(sizeof(value)) && value == hdr_->probeValue;
  if (!ok)
    FERRY_INFO(log::kShm, "shm: cross-memory attach to rank %d unavailable (%s); copying through "
               "shared memory", peer_, n < 0 ? strerror(errno) : "probe mismatch");
  hdr_->canRead[side_].store(ok ? 1 : 2, std::memory_order_release);
}

Status ShmConnection::badRecord(const RecordHeader* h) const {
  return internalError("shm: malformed record from rank " + std::to_string(peer_) + " (kind " +
                       std::to_string(h->kind) + ", " + std::to_string(h->size) + " bytes at " +
                       std::to_string(recvPos_) + " of " + name_ + ")");
}

Status ShmConnection::nothingYet(const RecordHeader* h) {
  // Reading the tail on every poll would make its line move with each
  // piece again; a corrupt record only needs to be found, not found at once.
  constexpr uint32_t kTailCheckEvery = 64;
  if (recvHeadShown_ != recvHead_) showHead();  // all read: the producer may see it all
  if (++emptyPolls_ >= kTailCheckEvery) {
    emptyPolls_ = 0;
    // The tail is stored after the stamps it covers: read in this order, a
    // covered record that still lacks its stamp never will have it.
    if (in_->tail.load(std::memory_order_acquire) > recvHead_ &&
        h->stamp.load(std::memory_order_acquire) != stampAt(recvHead_))
      return badRecord(h);
  }
  return peerFailed();
}

Status ShmConnection::tryRecv(RecvPiece* out) {
  *out = RecvPiece{};
  if (!probed_) probePeer();
  if (!inTouched_) {
    mem::touchPages(inRing_, ring_);
    inTouched_ = true;
  }
  const RecordHeader* h;
  for (;;) {
    h = reinterpret_cast<const RecordHeader*>(inRing_ + recvPos_);
    if (h->stamp.load(std::memory_order_acquire) != stampAt(recvHead_)) return nothingYet(h);
    if (h->kind != kSkip) break;
    recvHead_ += ring_ - recvPos_;
    recvPos_ = 0;
  }
  size_t pos = recvPos_;
  const char* body = reinterpret_cast<const char*>(h) + kRecordHeader;  // a reference's fields
  out->ready = true;
  out->size = h->size;
  recvIsRef_ = h->kind == kRef || h->kind == kSharedRef;
  if (h->kind == kInline || h->kind == kInlineNear) {
    bool near = h->kind == kInlineNear;
    if (h->size > slotBytes_ || pos + recordBytes(h->size) > ring_)
      return badRecord(h);
    recvLen_ = recordBytes(h->size);
    out->data = reinterpret_cast<const char*>(h) + (near ? kRecordHeader : kPayloadOffset);
    return Status::ok();
  }
  if (h->kind != kRef && h->kind != kSharedRef) return badRecord(h);
  recvLen_ = kRecordAlign;
  const auto* r = reinterpret_cast<const RefFields*>(body);
  out->isRef = true;
  out->data = reinterpret_cast<const void*>(r->addr);
  // In the peer's ncclMemAlloc memory, mapped here: read it in place, like
  // bytes in the ring (the peer keeps it unchanged until we release it).
  if (h->kind == kSharedRef) {
    if (const char* m = mapped(r)) {
      out->isRef = false;
      out->data = m + r->fileOffset;
    }
  }
  return Status::ok();
}

const char* ShmConnection::mapped(const RefFields* h) {
  constexpr size_t kMaxMaps = 32;  // allocations of one peer kept mapped
  auto it = maps_.find(h->allocId);
  if (it != maps_.end()) return it->second.data();
  if (mapFailed_) return nullptr;
  Result<mem::PeerMapping> m =
      mem::PeerMapping::map(hdr_->pid[1 - side_], static_cast<int>(h->fd), 0, h->fileBytes);
  if (!m.isOk()) {
    mapFailed_ = true;
    FERRY_INFO(log::kShm, "shm: cannot map rank %d's ncclMemAlloc memory (%s); reading it by "
               "cross-memory attach", peer_, m.status().message().c_str());
    return nullptr;
  }
  // Allocation ids only grow: the smallest is the oldest.
  if (maps_.size() >= kMaxMaps) maps_.erase(maps_.begin());
  FERRY_INFO(log::kShm, "shm: mapped rank %d's ncclMemAlloc allocation %llu (%llu bytes): its "
             "pieces are read in place", peer_, static_cast<unsigned long long>(h->allocId),
             static_cast<unsigned long long>(h->fileBytes));
  return maps_.emplace(h->allocId, m.take()).first->second.data();
}

Status ShmConnection::readRef(const RecvPiece& piece, size_t offset, void* dst, size_t bytes) {
  char* d = static_cast<char*>(dst);
  uint64_t src = reinterpret_cast<uint64_t>(piece.data) + offset;
  while (bytes > 0) {
    iovec local{d, bytes};
    iovec remote{reinterpret_cast<void*>(src), bytes};
    ssize_t n = process_vm_readv(hdr_->pid[1 - side_], &local, 1, &remote, 1, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return remoteError("shm: reading " + std::to_string(bytes) + " bytes from rank " +
                         std::to_string(peer_) + " failed: " + (n < 0 ? strerror(errno) : "EOF"));
    }
    d += n;
    src += n;
    bytes -= n;
  }
  return Status::ok();
}

Status ShmConnection::releaseRecv() {
  recvHead_ += recvLen_;
  recvPos_ += recvLen_;
  if (recvPos_ == ring_) recvPos_ = 0;
  recvLen_ = 0;
  if (recvIsRef_ || recvHead_ - recvHeadShown_ >= kHeadBatch) showHead();
  return Status::ok();
}

void ShmConnection::showHead() {
  recvHeadShown_ = recvHead_;
  in_->head.store(recvHead_, std::memory_order_release);
}

// Inline pieces need not be waited for (the ring holds them), and the
// consumer publishes its head in batches: only references are waited on.
bool ShmConnection::sendsDrained() {
  if (!probed_) probePeer();
  return out_->head.load(std::memory_order_acquire) >= refsEnd_;
}

// The peer shows its head in batches (kHeadBatch): everything but the
// last few KiB taken is what we can see, and that is what counts.
bool ShmConnection::sendsConsumed() {
  if (!probed_) probePeer();
  return out_->head.load(std::memory_order_acquire) + kHeadBatch > sendTail_;
}

// The segment outlives its creator (stepClose): what the peer published
// before it exited is read from it as usual.
bool ShmConnection::outlivesPeer() {
  if (in_->tail.load(std::memory_order_acquire) <= recvHead_) return false;
  uint64_t head = out_->head.load(std::memory_order_acquire);
  return head >= refsEnd_ && ring_ - (sendTail_ - head) >= 2 * recordBytes(kMinPayload);
}

// The creator of a segment that the peer has not mapped yet unlinks it when
// it goes (connect() never waits for the peer), and with it any piece it
// sent: a rank that sent and then destroyed its communicator before a slower
// receiver got to the pair lost its data (the receiver failed with "rank N
// exited"). So closing waits, under the communicator's close deadline, until
// the peer has mapped the segment; its mapping then keeps the pieces.
bool ShmConnection::stepClose(bool* moved) {
  (void)moved;
  if (!created_ || sendTail_ == 0) return true;
  return hdr_->attached.load(std::memory_order_acquire) != 0;
}

void ShmConnection::markFailed() {
  hdr_->failed[side_].store(1, std::memory_order_release);
}

std::string ShmConnection::describe() const {
  return "shm " + name_ + (refsOk_ ? " (cma)" : "");
}

}  // namespace ferry::shm
