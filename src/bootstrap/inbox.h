// Inbox: a rank's bootstrap listener (internal to Bootstrap).
//
// Serves the listener through an Acceptor and files what arrives: the ring
// link from rank-1 and point-to-point messages. Message sizes are bounded
// before anything is allocated: an announce above kMaxP2pBytes or naming a
// rank out of range is refused; the message recv() waits for must have the
// size it expects (else recv fails, naming both sizes, without reading the
// body); other messages are read ahead up to kMaxEagerBytes each and
// kMaxQueuedBytes in all, larger ones wait unread (parked) until asked for.
//
// Not thread-safe: Bootstrap calls it under its p2p lock.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "bootstrap/acceptor.h"
#include "net/socket.h"

namespace ferry::bootstrap {

class Inbox final : public Protocol {
 public:
  Inbox(int rank, int nranks, uint64_t secret, const Socket& listener);

  // Serve the listener until the ring connection from rank-1 arrived.
  Status acceptRing(Socket* ringIn, const Until& u);
  // Serve the listener until the message (peer, tag) is here; it must have
  // exactly `size` bytes.
  Status recv(int peer, int tag, void* data, size_t size, const Until& u);

  size_t headBytes(uint32_t type) const override;
  BodyPlan body(uint32_t type, const uint8_t* head) override;
  void abandoned(uint32_t type, const uint8_t* head, size_t bytes) override;

 private:
  struct Message {
    int rank;
    int tag;
    uint64_t size;           // as announced
    std::vector<char> data;  // empty unless size was what the receiver expected
  };
  // One Acceptor round; files what completed.
  Status pump(const Until& u, const std::string& what);
  void file(Incoming in);
  bool takeQueued(int peer, int tag, void* data, size_t size, Status* st);

  int rank_;
  int nranks_;
  const Socket& listener_;
  Acceptor acceptor_;
  std::deque<Message> queue_;
  uint64_t queuedBytes_ = 0;  // bodies being read or queued
  // What recv() waits for (awaiting_ false outside recv).
  bool awaiting_ = false;
  int awaitPeer_ = -1, awaitTag_ = 0;
  uint64_t awaitSize_ = 0;
  Socket* ringIn_ = nullptr;  // set while acceptRing() waits
};

}  // namespace ferry::bootstrap
