// Fuzz target: the network handshakes.
//   0 the net transport's pair hello (transports/net/net_hello.cc): 24 bytes
//     expected {commHash, secret, rank, nranks}, then what arrived;
//   1 a Socket-network listen handle from a peer (transports/netsocket/net_wire.cc);
//   2 a Socket-network hello on an accepted socket: nonce, stream count and
//     whether resumes are allowed (FERRY_NET_RETRY_MS > 0), then the hello;
//   3 a receiver's reply to a resume: the sender's acked and posted counts, then the reply.
#include "tests/fuzz/fuzz_util.h"
#include "transports/net/net_hello.h"
#include "transports/netsocket/net_wire.h"

using namespace ferry;

namespace {

void pairHello(fuzz::Bytes in) {
  net::HelloExpect e;
  e.commHash = in.take<uint64_t>();
  e.secret = in.take<uint64_t>();
  e.rank = in.take<int32_t>();
  e.nranks = in.take<int32_t>();
  net::Hello h;
  Status st = net::checkHello(in.data(), in.size(), e, &h);
  if (st.isOk()) {
    FUZZ_CHECK(h.rank >= 0 && h.rank < e.nranks && h.rank != e.rank);
    FUZZ_CHECK(h.magic == net::kHelloMagic && h.secret == e.secret && h.commHash == e.commHash);
  }
}

void socketHandle(fuzz::Bytes in) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  size_t n = in.size() < sizeof(handle) ? in.size() : sizeof(handle);
  std::memcpy(handle, in.data(), n);
  auto v = netsocket::decodeHandle(handle, sizeof(handle));
  if (v.isOk()) {
    const netsocket::Config& c = v.value().cfg;
    FUZZ_CHECK(v.value().to.valid());
    FUZZ_CHECK(c.nThreads >= 0 && c.nThreads <= netsocket::kMaxThreads && c.nSocks >= 1);
    FUZZ_CHECK(c.nStreams() >= 1 && c.nStreams() <= netsocket::kMaxStreams);
    FUZZ_CHECK(c.retryMs <= netsocket::kMaxRetryMs);
    (void)v.value().to.toString();
  }
  (void)netsocket::decodeHandle(in.data(), in.size());
}

void socketHello(fuzz::Bytes in) {
  uint64_t nonce = in.take<uint64_t>();
  uint32_t want = in.take<uint8_t>() % (netsocket::kMaxStreams + 1);
  bool resumeOk = in.take<uint8_t>() & 1;
  netsocket::Hello h = in.take<netsocket::Hello>();
  Status st = netsocket::checkHello(h, nonce, want, "10.0.0.1<1234>", resumeOk);
  if (st.isOk()) {
    FUZZ_CHECK(h.index <= want && h.nStreams == want && h.nonce == nonce);
    FUZZ_CHECK(resumeOk || h.epoch == 0);
  }
}

void resumeReply(fuzz::Bytes in) {
  uint64_t acked = in.take<uint64_t>();
  uint64_t posted = in.take<uint64_t>();
  netsocket::ResumeReply r = in.take<netsocket::ResumeReply>();
  auto from = netsocket::checkResumeReply(r, acked, posted, "10.0.0.1<1234>");
  if (from.isOk()) {
    FUZZ_CHECK(r.magic == netsocket::kResumeMagic && r.status == netsocket::kResumed);
    FUZZ_CHECK(from.value() == r.received && acked <= from.value() && from.value() <= posted);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Bytes in(data, size);
  switch (in.take<uint8_t>() % 4) {
    case 0: pairHello(in); break;
    case 1: socketHandle(in); break;
    case 2: socketHello(in); break;
    default: resumeReply(in); break;
  }
  return 0;
}
