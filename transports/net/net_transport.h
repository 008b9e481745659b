// The "net" transport: Connections over an NCCL network (net_registry.h)
// for peers on other nodes, or any peer when shared memory is disabled.
//
// Set-up (prepare, collective): communicators that span hosts open the
// network, listen on each of its devices (up to kMaxRails) and allgather the
// 128-byte listen handles and each rank's home device: its rail, the NIC of
// its GPU in the host's rail table (CommContext::railNics), else device
// localRank % ndev. A connection always ends at the peer's home device (the
// receive side is the peer's NIC). It starts from:
//  - PXN (default): this host's device on the peer's rail (same index as the
//    peer's home), so every packet stays on one rail and a rail-optimised
//    fabric's spine carries nothing. NCCL reaches that NIC through a GPU
//    next to it; host memory reaches every NIC of its host directly.
//  - NCCL_PXN_DISABLE=1 / NCCL_P2P_PXN_LEVEL=0: this rank's home device, so
//    a pair on different rails crosses the spine (NCCL's behaviour without
//    PXN). Rail-aligned pairs (rings, trees) are the same either way.
//
// Pairs: a rank connects to a peer's handle and sends a 24-byte hello
// {commHash, rank, magic, secret} on the new send comm (the secret, as the
// old socket transport's, keeps a stray client that knows the hash from
// posing as a rank); the peer accepts on its one listener,
// reads the hello to learn who it is, and connects back. So connect(peer)
// never needs the peer to be inside connect(me): any connect() call pumps
// the listener and finishes the pairs other ranks started. A pair is a
// connection once both directions and the hello are through.
#pragma once

#include <cstddef>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "transports/net/net_hello.h"
#include "transports/net/net_registry.h"
#include "transports/transport.h"

namespace ferry::net {

class NetTransport : public Transport {
 public:
  static constexpr int kMaxRails = 8;

  ~NetTransport() override;
  const char* name() const override { return "net"; }
  Status setup(const CommContext& ctx, PeerInfo* self) override;
  Status prepare(const CommContext& ctx) override;
  bool canConnect(const CommContext& ctx, const PeerInfo& self,
                  const PeerInfo& peer) const override {
    return true;
  }
  Result<std::unique_ptr<Connection>> connect(const CommContext& ctx, int peer) override;
  TransportReport report() const override;

 private:
  struct Pair {
    void* sendComm = nullptr;
    void* recvComm = nullptr;  // identified by its hello
    Hello out;
    void* outMh = nullptr;
    void* outReq = nullptr;
    bool helloSent = false;
    bool complete() const { return sendComm && recvComm && helloSent; }
  };
  struct Incoming {
    void* recvComm = nullptr;
    Hello in;
    void* mh = nullptr;
    void* req = nullptr;
  };

  // One round of progress on every pending pair and incoming connection.
  Status pump(const CommContext& ctx, bool* moved);
  Status acceptNew(bool* moved);
  Status readHellos(const CommContext& ctx, bool* moved);
  Status advancePair(const CommContext& ctx, int peer, Pair& p, bool* moved);
  Pair& pairFor(const CommContext& ctx, int peer);
  Status check(ncclResult_t r, const char* call, const std::string& where);
  void closeAll();
  void reapHellos();

  std::mutex mu_;
  bool opened_ = false;
  ActiveNet net_;
  int dev_ = 0;  // home device
  bool pxn_ = true;
  int homeDevice(const CommContext& ctx) const;
  int sendDevice(int peer) const;
  // What each rank publishes: its listen handle on each of its rails.
  struct Listeners {
    int32_t ndev = 0;
    int32_t home = 0;  // the rank's home device (its rail)
    // Aligned: networks cast the handle to their own struct, as NCCL's do
    // (the UCX network's holds a pointer); after ndev it sat at offset 4.
    alignas(alignof(std::max_align_t)) char handle[kMaxRails][NCCL_NET_HANDLE_MAXSIZE] = {};
  };
  Status listenAll();
  std::vector<void*> listenComms_;  // one per rail
  std::vector<Listeners> handles_;  // every rank's
  std::map<int, std::unique_ptr<Pair>> pairs_;
  std::vector<std::unique_ptr<Incoming>> incoming_;
};

std::unique_ptr<Transport> createNetTransport();

}  // namespace ferry::net
