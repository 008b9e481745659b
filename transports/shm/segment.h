// Layout of one shared-memory segment between two ranks of a node.
//
// Side 0 is the lower rank, side 1 the higher rank. Whichever connects first
// creates the segment; the other attaches and then unlinks the name, so
// nothing is left in /dev/shm once both are in.
//
// Ring d carries pieces from side d to side 1-d as records packed one after
// another on line pairs (a byte ring, not fixed slots): an 8-byte piece is
// one 128-byte record, so small messages queue thousands deep in the same
// memory (8 deep with 128 KiB slots before: a Broadcast root could run only
// 8 operations ahead of its receivers).
//
// A record's first word is its stamp, (absolute position + 1) XOR the
// segment's random key, stored last: the consumer polls the stamp of the
// record it expects next, so each small piece moves one line between the
// cores. (It polled a `tail` counter before: two contended lines per piece,
// and a Broadcast root on another core complex than its receiver waited on
// both; 2-rank 8 B 0.24 -> 0.17 us.) No earlier record carries the stamp a
// position expects (positions only grow), nor does fresh memory (the key's
// top bit is set); stale payload bytes could only pass for a record if they
// held exactly that 64-bit value, which depends on the key no payload knows
// (a chance of 2^-64 per position and lap for bytes not chosen against it).
// The producer still publishes `tail` (bytes written, absolute) after its
// records, for the consumer's occasional consistency check (a record the
// tail covers must carry its stamp), and the consumer publishes `head` as it
// releases records, in batches (kHeadBatch); the producer reads `head` only
// when its cached view of the free space runs out.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ferry::shm {

constexpr uint64_t kSegmentMagic = 0x6665727279736d33ULL;  // "ferrysm3" (keyed stamps)
constexpr size_t kLine = 64;
// Records start on line pairs: the adjacent-line prefetcher fetches pairs,
// and a consumer reading one record must not pull in the line the producer
// writes next (packed 64-byte records made 2-rank 8 B SendRecv ~5-10% slower
// than the old slot FIFO; 128-byte ones are at par).
constexpr size_t kRecordAlign = 128;

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
  uint64_t stampKey;                 // random, top bit set (RecordHeader::stamp)
};

struct alignas(64) RingControl {
  alignas(64) std::atomic<uint64_t> head;  // consumer: bytes released (absolute)
  alignas(64) std::atomic<uint64_t> tail;  // producer: bytes published (absolute)
};

// Record kinds. kRef: {addr} in the producer's memory (process_vm_readv);
// kSharedRef: the same, inside a shared allocation (ncclMemAlloc:
// src/mem/shared_alloc.h) the consumer may map through /proc/<pid>/fd/<fd>
// and read in place; kSkip: the rest of the ring up to its end is unused
// (a record never straddles the end).
// kInlineNear: inline bytes right after the header, starting in the line
// the consumer reads first (pieces announced at up to kNearHint bytes).
enum RecordKind : uint32_t { kInline = 0, kRef = 1, kSharedRef = 2, kSkip = 3, kInlineNear = 4 };

// The first 16 bytes of every record; a reference's fields follow at once
// (RefFields), inline payload at kPayloadOffset. Records are whole line pairs.
struct RecordHeader {
  std::atomic<uint64_t> stamp;  // (absolute position + 1) ^ SegmentHeader::stampKey
  uint32_t size;                // payload bytes (inline or referenced)
  uint32_t kind;                // RecordKind
};
constexpr size_t kRecordHeader = sizeof(RecordHeader);
static_assert(kRecordHeader == 16);
// Inline payload starts on the record's second line: copies into and out of
// the ring stay 64-byte aligned (a 128 KiB memcpy 16 bytes off a line ran
// ~10% slower here). A small piece still takes one 128-byte record.
constexpr size_t kPayloadOffset = kLine;
constexpr size_t kNearPayload = kLine - kRecordHeader;  // a 16 B piece and its 32 B descriptor
// A piece announced (SendSlot::hint) at up to this many bytes is a
// kInlineNear record even when it does not fit the header's line: right
// after the header it takes a line less than from the second line on (1 KiB
// and its descriptor: 17 lines, not 18; 2-rank Send/Recv 1 / 2 / 4 KiB took
// 0.94 / 0.96 / 1.00 of the time, AlltoAll 1-8 KiB 0.95-1.00). Larger
// pieces stay line-aligned for the copy's sake.
constexpr size_t kNearHint = 4096;
// The smallest payload a slot is offered for: below it the sender waits for
// the consumer instead of splitting pieces into slivers, and a record that
// would start within this much of the ring's end starts over at 0.
constexpr size_t kMinPayload = 4096 - kPayloadOffset;
// The consumer publishes `head` once this many bytes are released, when it
// finds the ring empty, and at once after a reference (its producer waits
// for that one: sendsDrained). A store per record kept the head's line
// moving between the cores whenever a producer ahead of its consumer found
// the ring full and polled it. The bytes released but not yet published are
// at most this many, so usableBytes counts them as lost.
constexpr size_t kHeadBatch = 4096;

struct RefFields {
  uint64_t addr;
  uint64_t fd;          // kSharedRef: the allocation's memfd in the producer
  uint64_t allocId;     // kSharedRef: which allocation (fd numbers are reused)
  uint64_t fileBytes;   // kSharedRef: the allocation's size
  uint64_t fileOffset;  // kSharedRef: addr's offset in it
};
static_assert(kRecordHeader + sizeof(RefFields) <= kRecordAlign);

// Bytes a record with `payload` inline bytes occupies.
inline size_t recordBytes(size_t payload) {
  return (kPayloadOffset + payload + kRecordAlign - 1) / kRecordAlign * kRecordAlign;
}

inline size_t ringBytes(uint32_t slots, uint32_t slotBytes) { return size_t(slots) * slotBytes; }

// A stamp key as the segment's creator draws it: random, top bit set.
uint64_t newStampKey();

// Payload bytes the ring surely holds at once, for the "a step fits in half
// the FIFO" rule that keeps rings deadlock-free. Two steps written with
// nothing consumed lose to: one wrap's skip (< 4 KiB), the free 4 KiB the
// last slot request needs however small its piece, and each record's header
// and alignment (pieces of at least kMinPayload but each step's last, plus a
// descriptor per step), and the consumer's unpublished releases
// (kHeadBatch). Rings below kMinRingBytes are not supported.
constexpr size_t kMinRingBytes = 32768;
inline size_t usableBytes(uint32_t slots, uint32_t slotBytes) {
  size_t ring = ringBytes(slots, slotBytes);
  size_t overhead = 2 * recordBytes(kMinPayload) + kHeadBatch +
                    (ring / kMinPayload + 6) * (kPayloadOffset + kRecordAlign);
  return ring > 2 * overhead ? ring - overhead : ring / 4;
}

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
