// Layout of one shared-memory segment between two ranks of a node.
//
// Side 0 is the lower rank, side 1 the higher rank. Whichever connects first
// creates the segment; the other attaches and then unlinks the name, so
// nothing is left in /dev/shm once both are in. Fifo d carries pieces from side d to side 1-d: the producer
// owns `tail`, the consumer owns `head`, each on its own cache line. A slot
// holds either inline bytes or a reference {address, size} into the
// producer's memory, read with process_vm_readv.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ferry::shm {

constexpr uint64_t kSegmentMagic = 0x6665727279736d31ULL;  // "ferrysm1"

struct alignas(64) SegmentHeader {
  uint64_t magic;
  uint32_t slots;
  uint32_t slotBytes;
  std::atomic<uint32_t> ready;       // creator finished initialising
  std::atomic<uint32_t> attached;    // side 1 mapped it
  int32_t pid[2];
  uint64_t probeAddr[2];             // a word in each side's memory, for the CMA probe
  uint64_t probeValue;
  std::atomic<uint32_t> canRead[2];  // side i can read side 1-i's memory: 0 unknown, 1 yes, 2 no
  std::atomic<uint32_t> failed[2];   // side i gave up
};

struct alignas(64) FifoControl {
  alignas(64) std::atomic<uint64_t> tail;
  alignas(64) std::atomic<uint64_t> head;
};

// isRef: 0 inline bytes; 1 {addr} in the producer's memory (process_vm_readv);
// 2 the same, inside a shared allocation (ncclMemAlloc: src/mem/shared_alloc.h)
// the consumer may map through /proc/<pid>/fd/<fd> and read in place.
struct alignas(64) SlotHeader {
  uint64_t size;
  uint64_t isRef;
  uint64_t addr;
  uint64_t fd;          // isRef 2: the allocation's memfd in the producer
  uint64_t allocId;     // isRef 2: which allocation (fd numbers are reused)
  uint64_t fileBytes;   // isRef 2: the allocation's size
  uint64_t fileOffset;  // isRef 2: addr's offset in it
};

inline size_t slotStride(uint32_t slotBytes) { return sizeof(SlotHeader) + slotBytes; }

inline size_t headerBytes() { return 4096; }

inline size_t fifoBytes(uint32_t slots, uint32_t slotBytes) {
  return sizeof(FifoControl) + slots * slotStride(slotBytes);
}

inline size_t segmentBytes(uint32_t slots, uint32_t slotBytes) {
  return headerBytes() + 2 * fifoBytes(slots, slotBytes);
}

inline FifoControl* fifoControl(void* base, int dir, uint32_t slots, uint32_t slotBytes) {
  return reinterpret_cast<FifoControl*>(static_cast<char*>(base) + headerBytes() +
                                        dir * fifoBytes(slots, slotBytes));
}

inline SlotHeader* slotAt(FifoControl* f, uint64_t index, uint32_t slots, uint32_t slotBytes) {
  char* first = reinterpret_cast<char*>(f) + sizeof(FifoControl);
  return reinterpret_cast<SlotHeader*>(first + (index % slots) * slotStride(slotBytes));
}

inline void* slotData(SlotHeader* h) { return reinterpret_cast<char*>(h) + sizeof(SlotHeader); }

}  // namespace ferry::shm
