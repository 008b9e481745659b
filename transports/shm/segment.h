// Layout of one shared-memory segment between two ranks of a node.
//
// Side 0 is the lower rank, side 1 the higher rank. Whichever connects first
// creates the segment; the other attaches and then unlinks the name, so
// nothing is left in /dev/shm once both are in.
//
// Ring d carries pieces from side d to side 1-d as records packed one after
// another in cache lines (byte ring, not fixed slots): an 8-byte piece is a
// single 64-byte line, so small messages queue deep and cost one line each.
// A record's first word is its stamp: its absolute byte position + 1, stored
// last (release). The consumer polls the stamp at its head position: no tail
// counter, no second line to read. Stale bytes from the previous lap can
// never pass for a stamp because the producer zeroes the next record's first
// line before it stamps the current one (RingWriter in shm_connection.cc).
// The consumer publishes `head` (its position) when it releases a record; the
// producer reads it only when its cached view of the free space runs out.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ferry::shm {

constexpr uint64_t kSegmentMagic = 0x6665727279736d32ULL;  // "ferrysm2" (byte ring)
constexpr size_t kLine = 64;

struct alignas(64) SegmentHeader {
  uint64_t magic;
  uint32_t slots;      // ring bytes = slots * slotBytes (the configured FIFO size)
  uint32_t slotBytes;  // most payload bytes in one record
  std::atomic<uint32_t> ready;       // creator finished initialising
  std::atomic<uint32_t> attached;    // side 1 mapped it
  int32_t pid[2];
  uint64_t probeAddr[2];             // a word in each side's memory, for the CMA probe
  uint64_t probeValue;
  std::atomic<uint32_t> canRead[2];  // side i can read side 1-i's memory: 0 unknown, 1 yes, 2 no
  std::atomic<uint32_t> failed[2];   // side i gave up
};

struct alignas(64) RingControl {
  alignas(64) std::atomic<uint64_t> head;  // consumer: bytes released (absolute)
};

// Record kinds. kRef: {addr} in the producer's memory (process_vm_readv);
// kSharedRef: the same, inside a shared allocation (ncclMemAlloc:
// src/mem/shared_alloc.h) the consumer may map through /proc/<pid>/fd/<fd>
// and read in place; kSkip: the rest of the ring up to its end is unused
// (a record never straddles the end).
enum RecordKind : uint32_t { kInline = 0, kRef = 1, kSharedRef = 2, kSkip = 3 };

// The first 16 bytes of every record; inline payload follows at once, a
// reference's fields follow instead (RefFields). Records are whole lines.
struct RecordHeader {
  std::atomic<uint64_t> stamp;  // absolute position + 1 once valid; 0 or stale otherwise
  uint32_t size;                // payload bytes (inline or referenced)
  uint32_t kind;                // RecordKind
};
constexpr size_t kRecordHeader = sizeof(RecordHeader);
static_assert(kRecordHeader == 16);

struct RefFields {
  uint64_t addr;
  uint64_t fd;          // kSharedRef: the allocation's memfd in the producer
  uint64_t allocId;     // kSharedRef: which allocation (fd numbers are reused)
  uint64_t fileBytes;   // kSharedRef: the allocation's size
  uint64_t fileOffset;  // kSharedRef: addr's offset in it
};
static_assert(kRecordHeader + sizeof(RefFields) <= kLine);

// Bytes a record with `payload` inline bytes occupies.
inline size_t recordBytes(size_t payload) {
  return (kRecordHeader + payload + kLine - 1) / kLine * kLine;
}

inline size_t ringBytes(uint32_t slots, uint32_t slotBytes) { return size_t(slots) * slotBytes; }

inline size_t headerBytes() { return 4096; }

inline size_t directionBytes(uint32_t slots, uint32_t slotBytes) {
  return sizeof(RingControl) + ringBytes(slots, slotBytes);
}

inline size_t segmentBytes(uint32_t slots, uint32_t slotBytes) {
  return headerBytes() + 2 * directionBytes(slots, slotBytes);
}

inline RingControl* ringControl(void* base, int dir, uint32_t slots, uint32_t slotBytes) {
  return reinterpret_cast<RingControl*>(static_cast<char*>(base) + headerBytes() +
                                        dir * directionBytes(slots, slotBytes));
}

inline char* ringData(RingControl* c) { return reinterpret_cast<char*>(c) + sizeof(RingControl); }

}  // namespace ferry::shm
