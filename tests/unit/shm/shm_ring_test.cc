// The shared-memory byte ring (transports/shm/segment.h): pieces of any size
// arrive whole and in order across many laps, an 8-byte piece costs one
// 128-byte record, stale bytes of an earlier lap never pass for a record (the
// payloads below are filled with exactly the stamps a later lap would expect
// without the segment's key: with a key of 0 they pass and the test fails),
// and a malformed record is an error, not a crash. Both ends are
// ShmConnections on one memfd mapped twice, as two processes map it.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "transports/shm/shm.h"

namespace ferry::shm {
namespace {

class RingPair {
 public:
  RingPair(uint32_t slots, uint32_t slotBytes) : bytes_(segmentBytes(slots, slotBytes)) {
    int fd = memfd_create("ferry-ring-test", 0);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes_)), 0);
    void* a = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void* b = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    auto* h = new (a) SegmentHeader();
    h->magic = kSegmentMagic;
    h->slots = slots;
    h->slotBytes = slotBytes;
    h->stampKey = newStampKey();
    for (int d = 0; d < 2; ++d) new (ringControl(a, d, slots, slotBytes)) RingControl();
    ring = ringBytes(slots, slotBytes);
    txControl = ringControl(a, 0, slots, slotBytes);
    txRing = ringData(txControl);
    tx = std::make_unique<ShmConnection>(a, bytes_, 0, 1, false, false, "tx");
    rx = std::make_unique<ShmConnection>(b, bytes_, 1, 0, false, false, "rx");
  }
  size_t ring = 0;
  RingControl* txControl = nullptr;
  char* txRing = nullptr;  // side 0's ring, as side 0 maps it
  std::unique_ptr<ShmConnection> tx, rx;

 private:
  size_t bytes_;
};

// Fill a piece so that the first word of every line it covers holds the
// stamp a record starting on that line one lap later will carry.
void fillHostile(char* dst, size_t n, uint64_t firstLine, size_t ring, uint64_t seed) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<char>(seed * 131 + i * 7);
  for (size_t off = 0; off + 8 <= n; off += kLine) {
    uint64_t v = firstLine + kPayloadOffset + off + ring + 1;
    std::memcpy(dst + off, &v, 8);
  }
}

struct Sent {
  std::vector<char> bytes;
};

// Receives one piece if there is one; checks it against the oldest sent.
bool receiveOne(ShmConnection& rx, std::deque<Sent>* sent) {
  RecvPiece p;
  EXPECT_TRUE(rx.tryRecv(&p).isOk());
  if (!p.ready) return false;
  EXPECT_FALSE(sent->empty());
  if (sent->empty()) return false;
  const std::vector<char>& want = sent->front().bytes;
  EXPECT_EQ(p.size, want.size());
  EXPECT_EQ(std::memcmp(p.data, want.data(), std::min(p.size, want.size())), 0);
  sent->pop_front();
  EXPECT_TRUE(rx.releaseRecv().isOk());
  return true;
}

TEST(ShmRing, RandomPiecesCrossManyLapsWholeAndInOrder) {
  RingPair pair(4, 16384);  // a 64 KiB ring
  std::mt19937_64 rng(7);
  std::deque<Sent> sent;
  uint64_t tail = 0, total = 0;
  int pieces = 0;
  while (total < 150 * pair.ring) {
    SendSlot slot;
    ASSERT_TRUE(pair.tx->trySend(&slot).isOk());
    if (!slot.data) {
      ASSERT_FALSE(sent.empty()) << "no slot although everything was received";
      int n = 1 + static_cast<int>(rng() % sent.size());
      for (int i = 0; i < n; ++i) ASSERT_TRUE(receiveOne(*pair.rx, &sent));
      continue;
    }
    ASSERT_GE(slot.capacity, 4096u - kPayloadOffset);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(slot.data) % kLine, 0u) << "payload off a line";
    ASSERT_LE(slot.capacity, 16384u);
    size_t want = rng() % 3 == 0 ? 1 + rng() % 64 : 1 + rng() % 20000;
    size_t n = std::min(want, slot.capacity);
    size_t at = static_cast<size_t>(static_cast<char*>(slot.data) - kPayloadOffset - pair.txRing);
    if (at != tail % pair.ring) {  // the producer skipped to the ring's start
      ASSERT_EQ(at, 0u);
      tail += pair.ring - tail % pair.ring;
    }
    fillHostile(static_cast<char*>(slot.data), n, tail, pair.ring, static_cast<uint64_t>(pieces));
    sent.push_back({std::vector<char>(static_cast<char*>(slot.data), static_cast<char*>(slot.data) + n)});
    ASSERT_TRUE(pair.tx->commitSend(n).isOk());
    tail += recordBytes(n);
    total += n;
    ++pieces;
    if (rng() % 4 == 0) {  // catch up: the next line holds an earlier lap's bytes
      while (!sent.empty()) ASSERT_TRUE(receiveOne(*pair.rx, &sent));
      RecvPiece p;
      ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
      ASSERT_FALSE(p.ready) << "a stale line passed for a record at " << tail;
    }
  }
  while (!sent.empty()) ASSERT_TRUE(receiveOne(*pair.rx, &sent));
  RecvPiece p;
  ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
  EXPECT_FALSE(p.ready) << "a stale line passed for a record";
  EXPECT_TRUE(pair.tx->sendsDrained());
  EXPECT_GT(pieces, 1000);
}

TEST(ShmRing, SmallPiecesTakeOneRecordEach) {
  RingPair pair(8, 131072);  // 1 MiB, the default
  size_t queued = 0;
  for (;;) {
    SendSlot slot;
    ASSERT_TRUE(pair.tx->trySend(&slot).isOk());
    if (!slot.data) break;
    std::memcpy(slot.data, &queued, 8);
    ASSERT_TRUE(pair.tx->commitSend(8).isOk());
    ++queued;
  }
  // Everything but the minimum free space for a slot holds 128-byte records.
  EXPECT_GE(queued, (pair.ring - 4096) / kRecordAlign);
  for (size_t i = 0; i < queued; ++i) {
    RecvPiece p;
    ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
    ASSERT_TRUE(p.ready);
    ASSERT_EQ(p.size, 8u);
    size_t v = 0;
    std::memcpy(&v, p.data, 8);
    ASSERT_EQ(v, i);
    ASSERT_TRUE(pair.rx->releaseRecv().isOk());
  }
}

// A peer that exited after publishing is not a failure while what it sent
// is still unread here and nothing of ours waits on it (Comm::checkPeers).
TEST(ShmRing, OutlivesItsPeerWhileItsPiecesAreUnread) {
  RingPair pair(8, 131072);
  EXPECT_FALSE(pair.rx->outlivesPeer()) << "nothing sent";
  for (int i = 0; i < 2; ++i) {
    SendSlot slot;
    ASSERT_TRUE(pair.tx->trySend(&slot).isOk());
    ASSERT_NE(slot.data, nullptr);
    ASSERT_TRUE(pair.tx->commitSend(8).isOk());
  }
  EXPECT_TRUE(pair.rx->outlivesPeer()) << "two pieces unread";
  EXPECT_FALSE(pair.tx->outlivesPeer()) << "the other direction is empty";
  std::vector<char> big(4096, 'r');
  bool accepted = false;
  ASSERT_TRUE(pair.rx->sendRef(big.data(), big.size(), &accepted).isOk());
  ASSERT_TRUE(accepted);
  EXPECT_FALSE(pair.rx->outlivesPeer()) << "our reference waits on the peer";
  RecvPiece p;
  ASSERT_TRUE(pair.tx->tryRecv(&p).isOk());
  ASSERT_TRUE(p.ready && p.isRef);
  ASSERT_TRUE(pair.tx->releaseRecv().isOk());
  EXPECT_TRUE(pair.rx->outlivesPeer()) << "the reference was read";
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
    ASSERT_TRUE(p.ready);
    EXPECT_TRUE(pair.rx->outlivesPeer()) << "a piece still held";
    ASSERT_TRUE(pair.rx->releaseRecv().isOk());
  }
  EXPECT_FALSE(pair.rx->outlivesPeer()) << "everything read";
}

// The consumer publishes its head every kHeadBatch bytes and when it finds
// the ring empty, not per record; a reference is published at once, and only
// references are waited for (sendsDrained).
TEST(ShmRing, HeadIsPublishedInBatchesAndAtOnceAfterAReference) {
  RingPair pair(8, 131072);
  const std::atomic<uint64_t>& head = pair.txControl->head;
  constexpr size_t kPerBatch = kHeadBatch / kRecordAlign;
  for (size_t i = 0; i < 3 * kPerBatch; ++i) {
    SendSlot slot;
    ASSERT_TRUE(pair.tx->trySend(&slot).isOk());
    ASSERT_NE(slot.data, nullptr);
    ASSERT_TRUE(pair.tx->commitSend(8).isOk());
  }
  EXPECT_TRUE(pair.tx->sendsDrained()) << "inline pieces are not waited for";
  RecvPiece p;
  for (size_t i = 0; i < kPerBatch + 1; ++i) {
    ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
    ASSERT_TRUE(p.ready);
    ASSERT_TRUE(pair.rx->releaseRecv().isOk());
    EXPECT_EQ(head.load(), i + 1 < kPerBatch ? 0 : kHeadBatch) << "after " << i + 1 << " records";
  }
  std::vector<char> big(4096, 'r');
  bool accepted = false;
  ASSERT_TRUE(pair.tx->sendRef(big.data(), big.size(), &accepted).isOk());
  ASSERT_TRUE(accepted);
  EXPECT_FALSE(pair.tx->sendsDrained()) << "a reference not yet read";
  while (!p.isRef) {
    ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
    ASSERT_TRUE(p.ready);
    ASSERT_TRUE(pair.rx->releaseRecv().isOk());
  }
  EXPECT_EQ(head.load(), (3 * kPerBatch + 1) * kRecordAlign) << "published with the reference";
  EXPECT_TRUE(pair.tx->sendsDrained());
  SendSlot slot;
  ASSERT_TRUE(pair.tx->trySend(&slot).isOk());
  ASSERT_TRUE(pair.tx->commitSend(8).isOk());
  ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
  ASSERT_TRUE(pair.rx->releaseRecv().isOk());
  EXPECT_EQ(head.load(), (3 * kPerBatch + 1) * kRecordAlign);
  ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
  EXPECT_FALSE(p.ready);
  EXPECT_EQ(head.load(), (3 * kPerBatch + 2) * kRecordAlign) << "published on finding the ring empty";
}

TEST(ShmRing, ReferencesInterleaveWithInlinePieces) {
  RingPair pair(2, 4096);  // the smallest ring: skips at nearly every lap
  std::vector<char> big(1 << 20, 'r');
  for (int i = 0; i < 2000; ++i) {
    bool accepted = false;
    if (i % 3 == 0) {
      ASSERT_TRUE(pair.tx->sendRef(big.data() + i, 100000 + i, &accepted).isOk());
      ASSERT_TRUE(accepted);
    } else {
      SendSlot slot;
      ASSERT_TRUE(pair.tx->trySend(&slot).isOk());
      ASSERT_NE(slot.data, nullptr);
      size_t n = i % 2 ? 8 : slot.capacity;
      std::memset(slot.data, i & 0x7f, n);
      ASSERT_TRUE(pair.tx->commitSend(n).isOk());
    }
    RecvPiece p;
    ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
    ASSERT_TRUE(p.ready);
    if (i % 3 == 0) {
      EXPECT_TRUE(p.isRef);
      EXPECT_EQ(p.data, big.data() + i);
      EXPECT_EQ(p.size, static_cast<size_t>(100000 + i));
    } else {
      EXPECT_FALSE(p.isRef);
      EXPECT_EQ(static_cast<const char*>(p.data)[p.size - 1], static_cast<char>(i & 0x7f));
    }
    ASSERT_TRUE(pair.rx->releaseRecv().isOk());
    ASSERT_TRUE(pair.tx->sendsDrained());
  }
}

TEST(ShmRing, ConcurrentProducerAndConsumerAgree) {
  RingPair pair(4, 8192);  // 32 KiB: the producer laps the ring constantly
  constexpr int kPieces = 200000;
  std::thread producer([&] {
    std::mt19937 rng(3);
    for (int i = 0; i < kPieces;) {
      SendSlot slot;
      if (!pair.tx->trySend(&slot).isOk()) return;
      if (!slot.data) {
        std::this_thread::yield();
        continue;
      }
      size_t n = std::min<size_t>(slot.capacity, 4 + 4 * (rng() % 600));
      for (size_t off = 0; off + 4 <= n; off += 4) std::memcpy(static_cast<char*>(slot.data) + off, &i, 4);
      if (!pair.tx->commitSend(n).isOk()) return;
      ++i;
    }
  });
  int bad = 0;
  for (int i = 0; i < kPieces;) {
    RecvPiece p;
    ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
    if (!p.ready) {
      std::this_thread::yield();
      continue;
    }
    for (size_t off = 0; off + 4 <= p.size; off += 4) {
      int v;
      std::memcpy(&v, static_cast<const char*>(p.data) + off, 4);
      bad += v != i;
    }
    ASSERT_TRUE(pair.rx->releaseRecv().isOk());
    ++i;
  }
  producer.join();
  EXPECT_EQ(bad, 0);
}

// A small piece announced by its size starts right after the header (in
// the line the consumer reads first); an unannounced or larger one starts on
// the next line.
TEST(ShmRing, AnnouncedSmallPiecesShareTheHeaderLine) {
  RingPair pair(2, 8192);
  for (size_t hint : {size_t(8), kNearPayload, kNearPayload + 1, kNearHint, kNearHint + 1,
                      size_t(0)}) {
    SendSlot slot;
    slot.hint = hint;
    ASSERT_TRUE(pair.tx->trySend(&slot).isOk());
    ASSERT_NE(slot.data, nullptr);
    bool near = hint > 0 && hint <= kNearHint;
    uintptr_t line = reinterpret_cast<uintptr_t>(slot.data) % kRecordAlign;
    EXPECT_EQ(line, near ? kRecordHeader : kPayloadOffset) << "hint " << hint;
    if (hint > 0 && hint <= kNearPayload) {
      EXPECT_EQ(slot.capacity, kNearPayload);
    } else {
      EXPECT_GE(slot.capacity, std::min<size_t>(hint, 4096 - kPayloadOffset)) << "hint " << hint;
    }
    size_t n = hint ? hint : 100;
    std::memset(slot.data, 0x5a, n);
    ASSERT_TRUE(pair.tx->commitSend(n).isOk());
    RecvPiece p;
    ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
    ASSERT_TRUE(p.ready);
    // The consumer maps the ring elsewhere: same place in the record.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data) % kRecordAlign, line);
    EXPECT_EQ(p.size, n);
    EXPECT_EQ(static_cast<const unsigned char*>(p.data)[n - 1], 0x5a);
    ASSERT_TRUE(pair.rx->releaseRecv().isOk());
  }
  SendSlot slot;
  slot.hint = 8;
  ASSERT_TRUE(pair.tx->trySend(&slot).isOk());
  EXPECT_FALSE(pair.tx->commitSend(kNearPayload + 1).isOk()) << "more than the near slot offered";
}

// What the ring reports as its size for the "a step fits in half of it"
// rule (usableBytes) must hold two such steps, written as the executor
// writes them (each piece as large as the slot offered, a 32-byte
// descriptor first), from any starting position, with nothing consumed.
TEST(ShmRing, TwoHalfStepsFitWhateverTheShape) {
  // Every shape the transport makes: a multiple of 128 bytes per slot,
  // at least kMinRingBytes in all (shm_transport.cc raises the slot count).
  for (auto [slots, slotBytes] : {std::pair<uint32_t, uint32_t>{8, 4224}, {8, 4096}, {8, 131072},
                                  {2, 16384}, {4, 8320}, {3, 1 << 20}}) {
    size_t step = usableBytes(slots, slotBytes) / 2;
    for (size_t lead : {size_t(0), size_t(1), size_t(4000), size_t(9000)}) {
      RingPair pair(slots, slotBytes);
      // Move the start somewhere into the ring first.
      size_t moved = 0;
      while (moved < lead) {
        SendSlot slot;
        ASSERT_TRUE(pair.tx->trySend(&slot).isOk());
        ASSERT_NE(slot.data, nullptr);
        size_t n = std::min(slot.capacity, lead - moved + 1);
        ASSERT_TRUE(pair.tx->commitSend(n).isOk());
        moved += n;
        RecvPiece p;
        ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
        ASSERT_TRUE(pair.rx->releaseRecv().isOk());
      }
      for (int s = 0; s < 2; ++s) {
        SendSlot d;
        d.hint = 32;  // the operation descriptor
        ASSERT_TRUE(pair.tx->trySend(&d).isOk());
        ASSERT_NE(d.data, nullptr) << slots << "x" << slotBytes << " lead " << lead << " step " << s;
        ASSERT_TRUE(pair.tx->commitSend(32).isOk());
        for (size_t left = step; left > 0;) {
          SendSlot slot;
          ASSERT_TRUE(pair.tx->trySend(&slot).isOk());
          ASSERT_NE(slot.data, nullptr) << slots << "x" << slotBytes << " lead " << lead << " step "
                                        << s << ": " << left << " of " << step << " bytes left";
          size_t n = std::min(left, slot.capacity);
          ASSERT_TRUE(pair.tx->commitSend(n).isOk());
          left -= n;
        }
      }
    }
  }
}

TEST(ShmRing, MalformedRecordIsAnError) {
  RingPair pair(2, 4096);
  SendSlot slot;
  ASSERT_TRUE(pair.tx->trySend(&slot).isOk());
  ASSERT_TRUE(pair.tx->commitSend(8).isOk());
  // Corrupt the stamped record: an unknown kind, then an oversized inline piece.
  auto* h = reinterpret_cast<RecordHeader*>(static_cast<char*>(slot.data) - kPayloadOffset);
  h->kind = 9;
  RecvPiece p;
  Status s = pair.rx->tryRecv(&p);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("malformed record"), std::string::npos) << s.message();
  h->kind = kInline;
  h->size = 1 << 20;
  EXPECT_FALSE(pair.rx->tryRecv(&p).isOk());
  h->size = 8;
  uint64_t stamp = h->stamp.load();
  h->stamp.store(12345);  // not the stamp its position predicts: looks like nothing yet,
  s = Status::ok();       // until the consumer checks the producer's tail
  int polls = 0;
  for (; polls < 1000 && s.isOk(); ++polls) {
    s = pair.rx->tryRecv(&p);
    if (s.isOk()) {
      EXPECT_FALSE(p.ready);
    }
  }
  EXPECT_FALSE(s.isOk()) << "a published record without its stamp went unnoticed";
  EXPECT_NE(s.message().find("malformed record"), std::string::npos) << s.message();
  EXPECT_GT(polls, 1) << "the tail is read on every empty poll";
  h->stamp.store(stamp);
  ASSERT_TRUE(pair.rx->tryRecv(&p).isOk());
  EXPECT_TRUE(p.ready);
}

}  // namespace
}  // namespace ferry::shm
