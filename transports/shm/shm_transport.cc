#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/config.h"
#include "core/log.h"
#include "core/random.h"
#include "core/wait.h"
#include "transports/shm/shm.h"

namespace ferry::shm {
namespace {

// A word in this process' memory that peers read to prove CMA works.
const uint64_t kProbeWord = 0x5eedf00dcafe1234ULL;

std::string segmentName(uint64_t commHash, int lo, int hi) {
  char buf[96];
  snprintf(buf, sizeof(buf), "/ferry-%016llx-%d-%d", static_cast<unsigned long long>(commHash), lo,
           hi);
  return buf;
}

// Mapped with its page tables filled: small operations walk the whole ring
// (1 MiB per direction), and on the first lap every 4 KiB page cost each
// side a page fault, so a 2-rank 8 B SendRecv ran ~45% slower for its first
// ~8000 operations (0.47-0.50 against 0.32-0.34 us, perf/README.md).
Result<void*> mapFd(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return systemError("shm: mmap " + name + ": " + strerror(errno));
  return p;
}

// Creates and initialises the segment; nullptr when the peer already has.
Result<void*> createSegment(const std::string& name, int side, uint32_t slots, uint32_t slotBytes) {
  size_t bytes = segmentBytes(slots, slotBytes);
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST) return static_cast<void*>(nullptr);
  if (fd < 0) return systemError("shm: cannot create " + name + ": " + strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(name.c_str());
    return systemError("shm: cannot size " + name + " to " + std::to_string(bytes) +
                       " bytes: " + strerror(e) + " (is /dev/shm large enough?)");
  }
  // The pages now, so a /dev/shm too small for the rings fails here, with a
  // message, instead of killing the process with SIGBUS at the first piece
  // written past its end (a container's 64 MiB /dev/shm holds ~30 pairs).
  if (int e = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); e == ENOSPC) {
    close(fd);
    shm_unlink(name.c_str());
    return systemError("shm: no space in /dev/shm for " + name + " (" + std::to_string(bytes) +
                       " bytes per pair of local ranks; enlarge /dev/shm, e.g. docker "
                       "--shm-size, lower FERRY_SHM_SLOTS / FERRY_SHM_SLOT_BYTES, or set "
                       "NCCL_SHM_DISABLE=1)");
  }
  FERRY_ASSIGN(void* base, mapFd(fd, bytes, name));
  auto* h = new (base) SegmentHeader();
  h->magic = kSegmentMagic;
  h->slots = slots;
  h->slotBytes = slotBytes;
  h->pid[side] = getpid();
  h->probeAddr[side] = reinterpret_cast<uint64_t>(&kProbeWord);
  h->probeValue = kProbeWord;
  h->stampKey = newStampKey();
  for (int d = 0; d < 2; ++d) new (ringControl(base, d, slots, slotBytes)) RingControl();
  h->ready.store(1, std::memory_order_release);
  return base;
}

// Map the segment the peer created (waiting, briefly, for it to finish
// initialising it).
Result<std::pair<void*, size_t>> attachSegment(const CommContext& ctx, const std::string& name,
                                               int peer) {
  Waiter w(ctx.abortFlag, ctx.timeoutMs, "waiting for a shared-memory segment");
  for (;;) {
    int fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd >= 0) {
      struct stat st{};
      if (fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(headerBytes())) {
        size_t bytes = static_cast<size_t>(st.st_size);
        FERRY_ASSIGN(void* base, mapFd(fd, bytes, name));
        auto* h = static_cast<SegmentHeader*>(base);
        while (h->ready.load(std::memory_order_acquire) == 0) {
          Status s = w.idle();
          if (!s.isOk()) {
            munmap(base, bytes);
            return s;
          }
        }
        if (h->magic != kSegmentMagic || segmentBytes(h->slots, h->slotBytes) != bytes ||
            h->slotBytes % kRecordAlign != 0) {
          munmap(base, bytes);
          return internalError("shm: segment " + name + " has an unexpected layout");
        }
        return std::make_pair(base, bytes);
      }
      close(fd);
    } else if (errno != ENOENT) {
      return systemError("shm: cannot open " + name + ": " + strerror(errno));
    }
    Status s = ctx.connectCheck ? ctx.connectCheck(peer) : Status::ok();
    if (s.isOk()) s = w.idle();
    if (!s.isOk())
      return Status(s.code(), s.message() + " " + name + " from rank " + std::to_string(peer));
  }
}

}  // namespace

uint64_t newStampKey() { return random64() | (uint64_t(1) << 63); }

Status ShmTransport::setup(const CommContext&, PeerInfo*) { return Status::ok(); }

bool ShmTransport::canConnect(const CommContext&, const PeerInfo& self, const PeerInfo& peer) const {
  if (config::getBool(config::Param::kShmDisable)) return false;
  return self.hostHash == peer.hostHash && self.rank != peer.rank;
}

namespace {
// The ring per direction: slots x slotBytes bytes; slotBytes (a multiple of
// the record alignment, so every record and skip starts on a line pair) is
// also the most one record carries.
std::pair<uint32_t, uint32_t> fifoShape() {
  uint32_t slots = static_cast<uint32_t>(std::max<int64_t>(2, config::getInt(config::Param::kShmSlots)));
  int64_t sb = std::max<int64_t>(4096, config::getInt(config::Param::kShmSlotBytes));
  sb = std::min<int64_t>(sb, int64_t(1) << 30);
  auto bytes = static_cast<uint32_t>((sb + kRecordAlign - 1) / kRecordAlign * kRecordAlign);
  while (size_t(slots) * bytes < kMinRingBytes) ++slots;  // usableBytes needs room to spare
  return {slots, bytes};
}
}  // namespace

TransportReport ShmTransport::report() const {
  TransportReport r;
  if (config::getBool(config::Param::kShmDisable)) return r;
  r.active = true;
  auto [slots, slotBytes] = fifoShape();
  r.fifoBytes = usableBytes(slots, slotBytes);
  return r;
}

// Whichever side of the pair comes first creates the segment and goes on at
// once; the other maps it. So connect() never waits for a peer that may
// never connect (it died, or it runs a different operation that does not
// need this pair): the sender's first piece waits in the FIFO, and every
// later wait checks the peer's liveness and failure flag.
Result<std::unique_ptr<Connection>> ShmTransport::connect(const CommContext& ctx, int peer) {
  int lo = std::min(ctx.rank, peer), hi = std::max(ctx.rank, peer);
  std::string name = segmentName(ctx.commHash, lo, hi);
  bool allowRefs = !config::getBool(config::Param::kP2pDisable);
  int side = ctx.rank == lo ? 0 : 1;
  auto [slots, slotBytes] = fifoShape();
  FERRY_ASSIGN(void* base, createSegment(name, side, slots, slotBytes));
  size_t bytes = segmentBytes(slots, slotBytes);
  bool created = base != nullptr;
  if (!created) {
    FERRY_ASSIGN(auto mapped, attachSegment(ctx, name, peer));
    base = mapped.first;
    bytes = mapped.second;
    auto* h = static_cast<SegmentHeader*>(base);
    h->pid[side] = getpid();
    h->probeAddr[side] = reinterpret_cast<uint64_t>(&kProbeWord);
    h->attached.store(1, std::memory_order_release);
    shm_unlink(name.c_str());  // both sides mapped it: nothing to leak from now on
  }
  FERRY_INFO(log::kShm | log::kInit, "Connected rank %d <-> rank %d via SHM %s", ctx.rank, peer,
             name.c_str());
  return std::unique_ptr<Connection>(
      new ShmConnection(base, bytes, side, peer, allowRefs, created, name));
}

}  // namespace ferry::shm
