#include <sys/mman.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "transports/shm/shm.h"

namespace ferry::shm {

ShmConnection::ShmConnection(void* base, size_t bytes, int side, int peerRank, bool allowRefs,
                             bool created, std::string name)
    : hdr_(static_cast<SegmentHeader*>(base)), bytes_(bytes), side_(side), peer_(peerRank),
      allowRefs_(allowRefs), created_(created), name_(std::move(name)), slots_(hdr_->slots),
      slotBytes_(hdr_->slotBytes) {
  out_ = fifoControl(base, side_, slots_, slotBytes_);
  in_ = fifoControl(base, 1 - side_, slots_, slotBytes_);
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

bool ShmConnection::sendSlotFree() {
  if (sendTail_ - sendHeadSeen_ < slots_) return true;
  sendHeadSeen_ = out_->head.load(std::memory_order_acquire);
  return sendTail_ - sendHeadSeen_ < slots_;
}

Status ShmConnection::trySend(SendSlot* out) {
  *out = SendSlot{};
  if (!sendSlotFree()) return peerFailed();
  SlotHeader* h = slotAt(out_, sendTail_, slots_, slotBytes_);
  out->data = slotData(h);
  out->capacity = slotBytes_;
  return Status::ok();
}

Status ShmConnection::commitSend(size_t bytes) {
  SlotHeader* h = slotAt(out_, sendTail_, slots_, slotBytes_);
  h->size = bytes;
  h->isRef = 0;
  out_->tail.store(++sendTail_, std::memory_order_release);
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
  if (!sendSlotFree()) return peerFailed();
  SlotHeader* h = slotAt(out_, sendTail_, slots_, slotBytes_);
  h->size = bytes;
  h->isRef = 1;
  h->addr = reinterpret_cast<uint64_t>(src);
  mem::SharedRange r;
  if (mem::lookupShared(src, bytes, &r)) {
    h->isRef = 2;
    h->fd = static_cast<uint64_t>(r.fd);
    h->allocId = r.id;
    h->fileBytes = r.allocBytes;
    h->fileOffset = r.fileOffset;
  }
  out_->tail.store(++sendTail_, std::memory_order_release);
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

Status ShmConnection::tryRecv(RecvPiece* out) {
  *out = RecvPiece{};
  if (!probed_) probePeer();
  if (recvHead_ == recvTailSeen_) {
    recvTailSeen_ = in_->tail.load(std::memory_order_acquire);
    if (recvHead_ == recvTailSeen_) return peerFailed();
  }
  SlotHeader* h = slotAt(in_, recvHead_, slots_, slotBytes_);
  out->ready = true;
  out->size = h->size;
  out->isRef = h->isRef != 0;
  out->data = out->isRef ? reinterpret_cast<const void*>(h->addr) : slotData(h);
  // In the peer's ncclMemAlloc memory, mapped here: read it in place, like
  // bytes in a slot (the peer keeps it unchanged until we release it).
  if (h->isRef == 2) {
    if (const char* m = mapped(h)) {
      out->isRef = false;
      out->data = m + h->fileOffset;
    }
  }
  return Status::ok();
}

const char* ShmConnection::mapped(const SlotHeader* h) {
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
  in_->head.store(++recvHead_, std::memory_order_release);
  return Status::ok();
}

bool ShmConnection::sendsDrained() {
  if (!probed_) probePeer();
  return out_->head.load(std::memory_order_acquire) == sendTail_;
}

void ShmConnection::markFailed() {
  hdr_->failed[side_].store(1, std::memory_order_release);
}

std::string ShmConnection::describe() const {
  return "shm " + name_ + (refsOk_ ? " (cma)" : "");
}

}  // namespace ferry::shm
