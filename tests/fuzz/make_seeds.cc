// Writes the binary seed inputs of tests/fuzz/corpus/ with Ferry's own
// encoders (run once by hand; the files are committed):
//   build-fuzz/bin/fuzz_make_seeds tests/fuzz/corpus
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "exec/op_check.h"
#include "transports/net/net_hello.h"
#include "transports/netsocket/net_comm.h"

using namespace ferry;

namespace {
std::string gDir;

struct Out {
  std::vector<uint8_t> b;
  template <class T>
  Out& put(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Out& raw(const void* p, size_t n) {
    b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    return *this;
  }
  Out& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
  void write(const std::string& target, const std::string& name) {
    std::string path = gDir + "/" + target + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size()) {
      std::perror(path.c_str());
      std::exit(1);
    }
    std::fclose(f);
  }
};

SockAddr addr(const char* text) { return SockAddr::parse(text).value(); }

void opCheck() {
  OpInfo ar{CollKind::kAllReduce, 1048576, -1, 7, kOpSum, 3, 0};
  OpDescriptor d = makeDescriptor(ar, 2, 4194304);
  Out().put(d).put(d).write("op_check", "allreduce_match");
  OpInfo bc{CollKind::kBroadcast, 1000, 0, 7, kOpNone, 4, 0};
  Out().put(d).put(makeDescriptor(bc, 2, 4000)).write("op_check", "allreduce_vs_broadcast");
  OpInfo p2p{CollKind::kSendRecv, 0, -1, 0xff, kOpNone, 0, 0};
  Out().put(makeDescriptor(p2p, 5, 64)).put(makeDescriptor(p2p, 5, 128)).write("op_check", "sendrecv_size");
  Out().put(d).raw("\0\0\0\0garbage", 11).write("op_check", "short_piece");
}

void bootstrapSeeds() {
  using namespace ferry::bootstrap;
  ConnHeader h{0x1234567890abcdefULL, kCheckIn};
  CheckIn ci{};
  ci.rank = 1;
  ci.nranks = 4;
  addr("10.0.0.2:40123").pack(ci.addr);
  Out().put(uint8_t(0)).put(h).put(ci).write("bootstrap", "checkin_v4");
  addr("[fd00::2]:40123").pack(ci.addr);
  Out().put(uint8_t(0)).put(h).put(ci).write("bootstrap", "checkin_v6");
  ci.rank = 4;
  Out().put(uint8_t(0)).put(h).put(ci).write("bootstrap", "checkin_bad_rank");
  P2pHeader p{2, 7, 4096};
  Out().put(uint8_t(1)).put(int32_t(4)).put(p).write("bootstrap", "p2p_ok");
  P2pHeader big{2, 7, uint64_t(1) << 32};
  Out().put(uint8_t(1)).put(int32_t(4)).put(big).write("bootstrap", "p2p_oversized");
  Out ok;
  ok.put(uint8_t(2)).put(int32_t(2)).put(RootReply{kReplyOk, 2 * SockAddr::kPackedBytes});
  uint8_t slot[SockAddr::kPackedBytes];
  addr("10.0.0.1:5000").pack(slot);
  ok.raw(slot, sizeof(slot));
  addr("[fd00::1]:5001").pack(slot);
  ok.raw(slot, sizeof(slot));
  ok.write("bootstrap", "reply_table");
  const char why[] = "nranks mismatch: rank 1 says nranks 3, rank 0 says 4";
  Out().put(uint8_t(2)).put(int32_t(4)).put(RootReply{kReplyMismatch, sizeof(why) - 1})
      .raw(why, sizeof(why) - 1).write("bootstrap", "reply_mismatch");
  Out().put(uint8_t(3)).put(RingHello{3}).write("bootstrap", "ring_hello");
  ncclUniqueId id;
  encodeId({0x1234567890abcdefULL, addr("10.0.0.1:5000")}, &id);
  Out().put(uint8_t(4)).raw(id.internal, sizeof(id.internal)).write("bootstrap", "unique_id");
  encodeId({kCommIdMagic, addr("[fd00::1]:29500")}, &id);
  Out().put(uint8_t(4)).raw(id.internal, sizeof(id.internal)).write("bootstrap", "unique_id_comm_id");
}

void netHello() {
  net::Hello h{0xfeedULL, 1, net::kHelloMagic, 0x5eedULL};
  Out().put(uint8_t(0)).put(uint64_t(0xfeed)).put(uint64_t(0x5eed)).put(int32_t(0)).put(int32_t(4))
      .put(h).write("net_hello", "pair_hello_ok");
  Out().put(uint8_t(0)).put(uint64_t(0xfeed)).put(uint64_t(0x5eee)).put(int32_t(0)).put(int32_t(4))
      .put(h).write("net_hello", "pair_hello_wrong_secret");
  netsocket::Handle hd{};
  hd.magic = netsocket::kMagic;
  hd.nThreads = 2;
  hd.nSocks = 2;
  hd.nonce = 0xabcdef;
  hd.inlineBytes = 65536;
  hd.retryMs = 5000;
  addr("10.0.0.1:41000").pack(hd.addr);
  hd.pending = nullptr;
  uint8_t buf[NCCL_NET_HANDLE_MAXSIZE] = {};
  std::memcpy(buf, &hd, sizeof(hd));
  Out().put(uint8_t(1)).raw(buf, sizeof(buf)).write("net_hello", "socket_handle");
  hd.nThreads = 40;
  std::memcpy(buf, &hd, sizeof(hd));
  Out().put(uint8_t(1)).raw(buf, sizeof(buf)).write("net_hello", "socket_handle_bad_threads");
  netsocket::Hello sh{netsocket::kMagic, 2, 4, 0, 0xabcdef, 99};
  Out().put(uint8_t(2)).put(uint64_t(0xabcdef)).put(uint8_t(4)).put(uint8_t(1)).put(sh)
      .write("net_hello", "socket_hello");
  sh.epoch = 3;
  Out().put(uint8_t(2)).put(uint64_t(0xabcdef)).put(uint8_t(4)).put(uint8_t(1)).put(sh)
      .write("net_hello", "socket_hello_resume");
  netsocket::ResumeReply rr{netsocket::kResumeMagic, netsocket::kResumed, 7};
  Out().put(uint8_t(3)).put(uint64_t(5)).put(uint64_t(9)).put(rr).write("net_hello", "resume_reply");
  rr.status = netsocket::kUnknown;
  Out().put(uint8_t(3)).put(uint64_t(5)).put(uint64_t(9)).put(rr).write("net_hello", "resume_reply_unknown");
}

void pluginProps() {
  ncclNetProperties_v10_t p10{};
  p10.speed = 400000;
  p10.maxRecvs = 8;
  p10.vProps.ndevs = 2;
  p10.vProps.devs[0] = 3;
  p10.vProps.devs[1] = 4;
  p10.maxP2pBytes = size_t(1) << 33;
  Out().put(uint8_t(4)).put(p10).zeros(260 - sizeof(p10)).raw("mlx5_0\0/sys/pci0", 16)
      .write("plugin_props", "v10");
  p10.vProps.ndevs = 9;
  Out().put(uint8_t(4)).put(p10).zeros(260 - sizeof(p10)).raw("bad\0", 4)
      .write("plugin_props", "v10_too_many_vdevs");
  ncclNetProperties_v7_t p7{};
  p7.speed = 100000;
  p7.netDeviceType = NCCL_NET_DEVICE_UNPACK;
  Out().put(uint8_t(1)).put(p7).zeros(260 - sizeof(p7))
      .raw("fake7", 5).write("plugin_props", "v7");
  ncclNetProperties_v11_t p11{};
  p11.vProps.ndevs = 1;
  Out().put(uint8_t(5)).put(p11).zeros(260 - sizeof(p11))
      .raw("eth0", 4).write("plugin_props", "v11");
}

}  // namespace

int main(int argc, char** argv) {
  gDir = argc > 1 ? argv[1] : "tests/fuzz/corpus";
  opCheck();
  bootstrapSeeds();
  netHello();
  pluginProps();
  std::printf("seeds written under %s\n", gDir.c_str());
  return 0;
}
