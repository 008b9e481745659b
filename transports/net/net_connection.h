// A Connection over an NCCL network plugin (any ncclNet_v11_t: the built-in
// Socket or UCX networks, or an external libnccl-net-*.so).
//
// A plugin connection is one-way, so a Ferry connection holds a sendComm and
// a recvComm. Each direction owns K staging slots registered with regMr.
// Sending: trySend hands out the next free slot, commitSend queues it, and
// progress() posts isends in order (a NULL request means "not now": retry
// later) and tests them; a slot is free again once its isend completed.
// Receiving: every free receive slot has an irecv posted, so up to K pieces
// can arrive before the caller consumes the first; releaseRecv reposts it.
// Sends and receives match in posting order, so pieces stay in order.
//
// The plugin's function pointers are read at each call: some plugins rewrite
// their exported table in init.
//
// Closing (net_close.cc). A plugin connection is never closed with a request
// in flight when the pair is healthy: some plugins (aws-ofi-nccl style) share
// one endpoint among all connections of a thread and device and tear it down
// when a comm closes with requests outstanding, which breaks every other
// communicator of the process. So the destructor runs a close exchange with
// the peer's destructor first: each side queues a header behind its last data
// piece saying how many receives it will have posted after the peer's header
// arrives (its slot count K); on seeing the peer's header a side posts exactly
// K receives more and then none, and it answers the peer's header with as many
// small filler messages as the peer announced. When every send has tested
// complete and every filler has arrived, no request is left and the comms are
// closed. Stray data pieces still arriving before the header are dropped.
// A header that tryRecv meets outside a close (the peer destroyed its
// communicator while this side still expects pieces) is a remote error.
// The exchange is bounded: FERRY_CLOSE_TIMEOUT_MS without progress, the
// abort flag, or a plugin error (a dead peer) end it. A communicator steps
// the close of all its connections together (stepClose, src/comm) under one
// such deadline, so no cycle of waits between pairs; ranks that destroy two
// communicators in opposite orders wait for each other until that deadline
// once, then close with requests in flight (WARN).
//
// A failed connection (plugin error, markFailed on abort or a failed
// collective), a connection to a rank of this same process (see
// setCloseExchange) and a close exchange that timed out close at once with
// whatever is in flight, as NCCL does on abort: the peer must learn promptly
// that we are gone, and the requests of a dead pair never complete. That
// case is logged: WARN when a live peer did not finish the exchange in time,
// INFO when the connection had failed or the peer was gone.
#pragma once

#include <nccl_net.h>

#include <atomic>
#include <string>
#include <vector>

#include "transports/transport.h"

namespace ferry::net {

// The enum name of a plugin's ncclResult_t (no dependency on the API edge).
const char* resultName(ncclResult_t r);

// ncclResult_t from a plugin -> Status, naming the call and the peer.
Status pluginStatus(ncclResult_t r, const char* call, const std::string& where);

class NetConnection : public Connection {
 public:
  // Takes ownership of both comms. Registration and the first irecvs happen
  // in init(); the constructor cannot fail.
  NetConnection(const ncclNet_v11_t* net, void* sendComm, void* recvComm, int peer, int slots,
                size_t slotBytes, std::string describe);
  ~NetConnection() override;
  Status init();

  Status trySend(SendSlot* out) override;
  Status commitSend(size_t bytes) override;
  Status tryRecv(RecvPiece* out) override;
  Status releaseRecv() override;
  bool sendsDrained() override;
  bool sendsFlushed() override { return sendsDrained(); }
  Status progress() override;
  void markFailed() override;
  std::string describe() const override { return describe_; }

  // The communicator's abort flag: ends a close exchange early (optional).
  void setAbortFlag(const std::atomic<bool>* flag) { abortFlag_ = flag; }
  // Off: close at once, as a failed connection does. For a peer in this
  // process (ncclCommInitAll with NCCL_SHM_DISABLE=1): its communicator is
  // typically destroyed after ours by the same thread, so it could never
  // take part in the exchange.
  void setCloseExchange(bool on) { closeExchange_ = on; }
  // The network notes the sockets its requests wait on (net_registry.h).
  void setWaitsOnFds(bool on) { waitsOnFds_ = on; }
  bool waitsOnFds() const override { return waitsOnFds_; }
  // One non-blocking step of the close exchange (started on first call).
  // True once it is over: *ok says whether every request completed. After
  // it, the connection carries no more pieces. *moved: something progressed.
  bool closeStep(bool* moved, bool* ok);
  bool stepClose(bool* moved) override;
  void reportFailure(Code reason) override;
  // Requests posted to the plugin and not yet tested complete.
  int requestsInFlight() const;

 private:
  struct Slot {
    std::vector<char> buf;  // staging memory (registered)
    void* mh = nullptr;     // memory handle from regMr
    void* req = nullptr;    // outstanding request, nullptr if none
    size_t size = 0;        // send: bytes to send; recv: bytes received
    bool done = false;      // recv: the request completed (it is freed by test)
  };

  Status postSends();
  Status testSends();
  Status postRecvs();
  Status check(ncclResult_t r, const char* call);
  void drainAtClose();
  void closeComms();
  bool queueCloseMsg(uint32_t kind, uint32_t count);
  // Error (latched) if a received piece is a close message outside a close.
  Status controlMessage(const void* data, size_t size);
  static bool isFailureNotice(const void* data, size_t size, Code* code);
  bool noticeArrived(Code* code);
  Status noticeStatus(Code code) const;
  Status takeCloseMsgs(bool* moved);

  const ncclNet_v11_t* net_;
  void* sendComm_;
  void* recvComm_;
  int peer_;
  int nslots_;
  size_t slotBytes_;
  std::string describe_;
  Status error_;

  std::vector<Slot> send_;
  int sendHead_ = 0;    // oldest queued or in-flight slot
  int sendCount_ = 0;   // queued + in flight
  int sendPosted_ = 0;  // of those, isend posted (the first sendPosted_ from head)
  bool slotOut_ = false;

  std::vector<Slot> recv_;
  int recvHead_ = 0;    // next piece in order
  int recvPosted_ = 0;  // slots from recvHead_ with an irecv posted (or completed)
  ncclResult_t recvPostFailed_ = ncclSuccess;  // irecv failed: post no more
  int recvBudget_ = -1;  // irecvs still allowed (-1: any; set by the close exchange)

  // Close exchange state (net_close.cc).
  const std::atomic<bool>* abortFlag_ = nullptr;
  bool closeExchange_ = true;
  bool waitsOnFds_ = false;
  bool closing_ = false;
  bool closeOver_ = false;
  bool headerQueued_ = false;
  int peerFillers_ = -1;  // fillers the peer wants (its header's count); -1 until it arrived
  int fillersQueued_ = 0;
  int fillersGot_ = 0;
  int strayPieces_ = 0;   // data pieces dropped while waiting for the peer's header
};

}  // namespace ferry::net
