// Helpers for the net transport tests: ranks as threads of one process,
// each with its own NetTransport, CommContext and PeerInfo (distinct host
// hashes, so the network is needed), and an in-test PeerExchange whose
// allgather is a barrier among the threads. Also forked ranks with a
// watchdog, and a "pump" that exchanges checked pieces over a Connection.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tests/support/test_util.h"
#include "transports/net/net_transport.h"
#include "transports/transport.h"

namespace ferry::nxtest {

// Set (or unset) a variable for the scope; config, log and the Socket
// network's device list re-read it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value);
  ~ScopedEnv();

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The allgather of n threads. tamper (optional) may rewrite the gathered
// blocks before the ranks see them (e.g. to point a rank at a foreign
// listener). Every round is kept in rounds() for inspection.
class ThreadGather {
 public:
  explicit ThreadGather(int n) : n_(n) {}
  Status allGather(int rank, void* all, size_t bytesPerRank);
  std::function<void(std::vector<char>& blocks, size_t bytesPerRank)> tamper;
  std::vector<char> round(int i);

 private:
  int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int generation_ = 0;
  std::vector<char> pending_;
  std::map<int, std::vector<char>> rounds_;
};

class RankExchange : public PeerExchange {
 public:
  RankExchange(ThreadGather* g, int rank) : g_(g), rank_(rank) {}
  Status allGather(void* all, size_t bytesPerRank) override {
    return g_->allGather(rank_, all, bytesPerRank);
  }

 private:
  ThreadGather* g_;
  int rank_;
};

// n ranks of one communicator, as threads. Member order matters:
// connections die before the transports that opened their network.
struct ThreadComm {
  explicit ThreadComm(int nranks, uint64_t commHash = 0x77, int64_t timeoutMs = 10000);
  ~ThreadComm();
  // setup() on every rank, then prepare() on every rank in parallel.
  Status setupAndPrepare();
  // What rank r published in prepare's allgather, and its listen handle on
  // rail 0 (the block is {int32 ndev, home; char handle[kMaxRails][128]}).
  std::vector<char> block(int r);
  std::vector<char> handle(int r);

  int n;
  std::atomic<bool> abortFlag{false};
  std::vector<PeerInfo> peers;
  std::vector<CommContext> ctx;
  ThreadGather gather;
  std::vector<std::unique_ptr<RankExchange>> ex;
  std::vector<std::unique_ptr<net::NetTransport>> tr;
  std::vector<std::vector<std::unique_ptr<Connection>>> conns;  // [rank][peer]
};

using test::runProcesses;
using test::runThreads;

// The k-th piece `from` sends to `to`: size varies with k (0 .. maxBytes),
// bytes with (from, to, k).
std::vector<char> piece(int from, int to, int k, size_t maxBytes);

// Sends `count` pieces to the peer while receiving its `count`, checking
// order and every byte; step() does whatever is possible right now.
class Pump {
 public:
  Pump(Connection& c, int me, int peer, int count, size_t maxBytes)
      : c_(c), me_(me), peer_(peer), count_(count), max_(maxBytes) {}
  bool done() { return sent_ == count_ && got_ == count_ && c_.sendsDrained(); }
  Status step(bool* moved);
  int got() const { return got_; }

 private:
  Connection& c_;
  int me_, peer_, count_;
  size_t max_;
  int sent_ = 0, got_ = 0;
};

Status pumpAll(std::vector<Pump>& pumps, int64_t timeoutMs);
Status exchange(Connection& c, int me, int peer, int count, size_t maxBytes, int64_t timeoutMs);

// Wait (bounded) for the next piece on c.
Status waitPiece(Connection& c, RecvPiece* p, int64_t timeoutMs);

}  // namespace ferry::nxtest
