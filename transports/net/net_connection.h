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
#pragma once

#include <nccl_net.h>

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
};

}  // namespace ferry::net
