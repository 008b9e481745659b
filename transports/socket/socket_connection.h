// One TCP connection to one peer, carrying pieces in both directions.
//
// Each piece travels as an 8-byte size header followed by its bytes. The send
// side owns FERRY_SOCKET_SLOTS staging slots: trySend hands out the next free
// slot, commitSend queues it, and progress() writes as much as the kernel
// takes. The receive side reads into as many slots, so up to that many pieces
// can have arrived before the caller consumes the first one.
//
// The peer's orderly close is reported (Code::kRemote) only to a tryRecv that
// finds no piece left; a reset, a close inside a piece, or a failed write is
// reported by every call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/socket.h"
#include "transports/transport.h"

namespace ferry::socket {

class SocketConnection : public Connection {
 public:
  SocketConnection(Socket sock, int peerRank, const SockAddr& peerAddr, int slots,
                   size_t slotBytes);
  // Pieces still staged here would die with the socket: the destructor keeps
  // writing them (unless the connection failed) until the peer stops taking
  // bytes for FERRY_TIMEOUT_MS.
  ~SocketConnection() override;

  Status trySend(SendSlot* out) override;
  Status commitSend(size_t bytes) override;
  bool supportsRef() const override { return false; }
  Status sendRef(const void* src, size_t bytes, bool* accepted) override;
  Status tryRecv(RecvPiece* out) override;
  Status readRef(const RecvPiece& piece, size_t offset, void* dst, size_t bytes) override;
  Status releaseRecv() override;
  // Pieces written to the kernel count as consumed: their bytes were copied.
  bool sendsDrained() override;
  bool sendsFlushed() override { return sendsDrained(); }
  Status progress() override;
  void markFailed() override;
  std::string describe() const override;

 private:
  struct OutPiece {
    uint64_t size = 0;  // payload bytes (the header carries this value)
    size_t done = 0;    // header + payload bytes written so far
  };
  struct InState {
    uint64_t header = 0;
    size_t headerGot = 0;
    size_t got = 0;  // payload bytes received into the current slot
  };

  Status pushSends();
  Status pullRecvs();
  void flush();
  // Latch the first error, reworded to name the peer; later calls return it.
  Status fail(const Status& st);

  Socket sock_;
  int peer_;
  SockAddr peerAddr_;
  int nslots_;
  size_t slotBytes_;
  Status error_;

  std::vector<std::vector<char>> sendBuf_;
  std::vector<OutPiece> sendQ_;  // indexed by slot
  int sendHead_ = 0;             // oldest queued slot
  int sendCount_ = 0;            // queued slots
  bool slotOut_ = false;         // trySend handed out slot sendHead_+sendCount_

  std::vector<std::vector<char>> recvBuf_;
  std::vector<uint64_t> recvSize_;
  int recvHead_ = 0;   // oldest complete piece
  int recvCount_ = 0;  // complete pieces
  InState in_;
  // The peer closed its end between pieces. Not an error by itself (a peer
  // that is done may destroy its communicator first); it becomes one when we
  // wait for a piece that can no longer come.
  bool peerClosed_ = false;
};

}  // namespace ferry::socket
