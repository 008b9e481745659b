// Bootstrap wire formats. Everything is sent in host byte order: the library
// requires all ranks to run the same build on the same architecture.
//
// Every connection opens with a ConnHeader (the id's secret and a type).
// Check-in (rank -> root): ConnHeader{kCheckIn} CheckIn; the root answers
//   RootReply{kReplyOk, nranks * 28 bytes} + the table of listen addresses,
//   or RootReply{another ReplyStatus, n <= kMaxReplyText} + n bytes of error text.
// Ring (rank -> rank+1): ConnHeader{kRing} RingHello.
// Point-to-point (any -> any): ConnHeader{kP2p} P2pHeader + size bytes,
//   size <= kMaxP2pBytes.
// Every size read from the wire is checked against these bounds (and the
// size the receiver expects) before anything is allocated for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "net/sock_addr.h"

namespace ferry::bootstrap {

enum ConnType : uint32_t {
  kCheckIn = 1,  // NCCL's "Bootstrap" socket type
  kRing = 16,
  kP2p = 17,
};

struct __attribute__((packed)) ConnHeader {
  uint64_t secret;
  uint32_t type;
};

struct __attribute__((packed)) CheckIn {
  int32_t rank;
  int32_t nranks;
  uint8_t addr[SockAddr::kPackedBytes];  // the rank's bootstrap listen address
};

// Why the root answered a check-in the way it did.
enum ReplyStatus : int32_t {
  kReplyOk = 0,
  kReplyFailed = 1,     // the rendezvous failed (e.g. timed out)
  kReplyMismatch = 2,   // check-ins disagree on nranks (the caller's usage)
  kReplyDuplicate = 3,  // two check-ins for one rank (the caller's usage)
  kReplyInvalid = 4,    // this check-in's rank/nranks are out of range
};

struct __attribute__((packed)) RootReply {
  int32_t status;  // a ReplyStatus; error text follows unless kReplyOk
  uint32_t bytes;
};

struct __attribute__((packed)) RingHello {
  int32_t rank;
};

struct __attribute__((packed)) P2pHeader {
  int32_t rank;
  int32_t tag;
  uint64_t size;
};

// Largest error text the root sends back.
constexpr uint32_t kMaxReplyText = 1024;
// Largest point-to-point message (bootstrap messages are control data);
// Bootstrap::send/recv refuse larger sizes, a receiver refuses a larger announce.
constexpr uint64_t kMaxP2pBytes = uint64_t(64) << 20;
// An announced message that nobody waits for yet is read ahead into memory up
// to this size (and kMaxQueuedBytes per rank in all); a larger one stays
// unread in its socket until recv() asks for it.
constexpr uint64_t kMaxEagerBytes = uint64_t(1) << 20;
constexpr uint64_t kMaxQueuedBytes = uint64_t(16) << 20;
// Largest nranks a root accepts in a check-in: a larger claim is refused as
// bogus without affecting the rendezvous (the root holds one connection per rank).
constexpr int32_t kMaxRanks = 1 << 20;

// Decoding what arrives on a bootstrap socket: pure functions over bytes (the
// fuzz targets in tests/fuzz call them directly). The socket code reads
// exactly the bytes these structs take and hands them over; a wrong size or
// a value out of range is an error Status whose message the caller logs.
//
// A check-in (the head after ConnHeader{kCheckIn}); *out is filled even when
// the ranks are out of range (the caller names them in its refusal).
Status decodeCheckIn(const uint8_t* data, size_t size, CheckIn* out);
// A point-to-point header announcing a message to a rank of `nranks`: the
// sender's rank must be one of them and the size at most kMaxP2pBytes.
Status decodeP2pHeader(const uint8_t* data, size_t size, int nranks, P2pHeader* out);
Status decodeRingHello(const uint8_t* data, size_t size, RingHello* out);
Status decodeConnHeader(const uint8_t* data, size_t size, ConnHeader* out);
Status decodeRootReply(const uint8_t* data, size_t size, RootReply* out);
// Bytes of error text to read after a refusing RootReply.
inline uint32_t replyTextBytes(const RootReply& r) { return r.bytes < kMaxReplyText ? r.bytes : kMaxReplyText; }
// The Status a refusing reply means for the rank that checked in (msg: the whole message).
Status replyStatus(int32_t status, const std::string& msg);
// The root's address table for `nranks` ranks: its announced size must be
// exactly nranks * SockAddr::kPackedBytes.
Status checkTableBytes(uint64_t bytes, int nranks);
Result<std::vector<SockAddr>> decodeAddressTable(const uint8_t* data, size_t size, int nranks);

}  // namespace ferry::bootstrap
