// Bootstrap: the out-of-band TCP network every communicator starts with.
//
// createUniqueId() starts a root (a detached thread with a listening socket)
// and packs its address into the 128-byte ncclUniqueId. Every rank then calls
// Bootstrap::create() with that id: it checks in at the root, learns every
// rank's listen address, and connects a ring (send to rank+1, receive from
// rank-1) used by allGather/barrier. send/recv open a connection to the
// peer's listener per message. Every connection presents the id's secret
// first; connections with a wrong secret are refused and logged (rate-limited).
// Listeners serve all their connections at once with per-connection
// deadlines (acceptor.h), so strangers cannot delay creation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <nccl.h>

#include "core/status.h"
#include "net/socket.h"

namespace ferry {

namespace bootstrap {
class Inbox;
}

// Contents of the 128-byte ncclUniqueId: bytes 0-7 a random 64-bit secret
// (magic), then the root's socket address (sockaddr_in/in6, 28 bytes); the
// rest zero (NCCL's layout).
Status createUniqueId(ncclUniqueId* out);
// Always a new random secret and a root of our own, ignoring NCCL_COMM_ID
// (child communicators of ncclCommSplit need their own rendezvous).
Status createFreshUniqueId(ncclUniqueId* out);

class Bootstrap {
 public:
  // Rendezvous through the root named in `id`; blocks until all nranks
  // checked in, or the deadline / abort flag.
  static Result<std::unique_ptr<Bootstrap>> create(const ncclUniqueId& id, int rank, int nranks,
                                                   const std::atomic<bool>* abortFlag,
                                                   int64_t timeoutMs);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  uint64_t secret() const { return secret_; }
  // Every rank's bootstrap listen address, as collected by the root.
  const std::vector<SockAddr>& peerAddrs() const { return peers_; }

  // My block is at allData + rank*bytesPerRank; on return all blocks are filled.
  Status allGather(void* allData, size_t bytesPerRank);
  Status barrier();
  // Control messages of at most kMaxP2pBytes (wire.h). recv expects exactly
  // `size` bytes; a message of another size from (peer, tag) is an error. Messages for other (peer, tag) pairs
  // that arrive first are kept until asked for.
  Status send(int peer, int tag, const void* data, size_t size);
  Status recv(int peer, int tag, void* data, size_t size);

  // Unblock anything waiting (it returns an error) and shut the sockets down.
  void abort();

 private:
  Bootstrap(int rank, int nranks, uint64_t secret, const std::atomic<bool>* abortFlag,
            int64_t timeoutMs);
  Until until() const { return Until::after(timeoutMs_, abortFlag_, &aborted_); }
  Status checkIn(const SockAddr& root, const Until& u);
  Status connectRing(const Until& u);

  int rank_;
  int nranks_;
  uint64_t secret_;
  const std::atomic<bool>* abortFlag_;
  int64_t timeoutMs_;
  std::atomic<bool> aborted_{false};

  Socket listener_;
  std::vector<SockAddr> peers_;
  std::mutex ringMu_;  // one ring collective at a time
  Socket ringOut_;     // to rank+1
  Socket ringIn_;      // from rank-1
  std::mutex p2pMu_;   // guards inbox_ (the listener's accept path)
  std::unique_ptr<bootstrap::Inbox> inbox_;
};

}  // namespace ferry
