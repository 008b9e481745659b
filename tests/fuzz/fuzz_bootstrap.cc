// Fuzz target: bootstrap messages (src/bootstrap/wire.cc, unique_id.cc).
// The first byte picks the message; the rest is what came off the socket:
//   0 check-in (ConnHeader + CheckIn, as the root reads it)
//   1 point-to-point header (as a rank's inbox reads it; 4 bytes of nranks first)
//   2 the root's reply and address table (as Bootstrap::checkIn reads it; 4 bytes of nranks first)
//   3 ring hello
//   4 an ncclUniqueId (128 bytes from another process)
#include <nccl.h>

#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "tests/fuzz/fuzz_util.h"

using namespace ferry;
using namespace ferry::bootstrap;

namespace {

void checkIn(fuzz::Bytes in) {
  ConnHeader h;
  if (!decodeConnHeader(in.data(), in.size() < sizeof(h) ? in.size() : sizeof(h), &h).isOk()) return;
  in.take<ConnHeader>();
  CheckIn ci;
  size_t n = in.size() < sizeof(ci) ? in.size() : sizeof(ci);
  Status st = decodeCheckIn(in.data(), n, &ci);
  if (st.isOk()) {
    FUZZ_CHECK(ci.rank >= 0 && ci.rank < ci.nranks && ci.nranks <= kMaxRanks);
    SockAddr a = SockAddr::unpack(ci.addr, sizeof(ci.addr));
    (void)a.toString();
    if (!a.valid()) return;  // the root stores it; connecting to it fails later
    uint8_t again[SockAddr::kPackedBytes];
    a.pack(again);
    FUZZ_CHECK(SockAddr::unpack(again, sizeof(again)) == a);
  }
}

void p2p(fuzz::Bytes in) {
  int nranks = in.take<int32_t>();
  P2pHeader p;
  Status st = decodeP2pHeader(in.data(), in.size() < sizeof(p) ? in.size() : sizeof(p), nranks, &p);
  if (st.isOk()) FUZZ_CHECK(p.rank >= 0 && p.rank < nranks && p.size <= kMaxP2pBytes);
}

void reply(fuzz::Bytes in) {
  int nranks = in.take<int32_t>();
  RootReply r;
  if (!decodeRootReply(in.data(), in.size() < sizeof(r) ? in.size() : sizeof(r), &r).isOk()) return;
  in.take<RootReply>();
  if (r.status != kReplyOk) {
    FUZZ_CHECK(replyTextBytes(r) <= kMaxReplyText);
    size_t n = in.size() < replyTextBytes(r) ? in.size() : replyTextBytes(r);
    std::string text(reinterpret_cast<const char*>(in.data()), n);
    FUZZ_CHECK(!replyStatus(r.status, "refused: " + text).isOk());
    return;
  }
  if (!checkTableBytes(r.bytes, nranks).isOk()) return;
  // Only a table of the announced (and expected) size is read off the socket.
  if (in.size() < r.bytes) return;
  auto peers = decodeAddressTable(in.data(), r.bytes, nranks);
  FUZZ_CHECK(peers.isOk() && peers.value().size() == size_t(nranks));
  for (const SockAddr& a : peers.value()) (void)a.toString();
}

void ring(fuzz::Bytes in) {
  RingHello h;
  (void)decodeRingHello(in.data(), in.size(), &h);
}

void uniqueId(fuzz::Bytes in) {
  ncclUniqueId id{};
  std::memcpy(id.internal, in.data(), in.size() < sizeof(id.internal) ? in.size() : sizeof(id.internal));
  IdContents c = decodeId(id);
  (void)c.root.toString();
  if (c.root.valid()) {
    ncclUniqueId again;
    encodeId(c, &again);
    IdContents d = decodeId(again);
    FUZZ_CHECK(d.secret == c.secret && d.root == c.root);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Bytes in(data, size);
  switch (in.take<uint8_t>() % 5) {
    case 0: checkIn(in); break;
    case 1: p2p(in); break;
    case 2: reply(in); break;
    case 3: ring(in); break;
    default: uniqueId(in); break;
  }
  return 0;
}
