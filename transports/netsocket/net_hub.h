// Hub: where a listener's connections arrive. It owns the listening socket,
// shared by the ListenComm and (retry on) every recv comm accepted from it,
// so a sender can resume a broken connection even after the caller closed
// the listen comm (NCCL may close it right after accept).
//
// Sockets are filed by their hello's connId: a new connection (epoch 0)
// waits for accept(); a resume (epoch > 0) waits for the recv comm that owns
// connId (only its newest epoch is kept). A resume for a connId nobody owns
// gets ResumeReply{kUnknown} and is closed. Thread-safe: the listen comm and
// the recv comms may be driven by different threads.
//
// With retry on, a helper thread (start()) also watches the listener, so a
// resume is answered even while its receiver makes no calls (it received
// everything it wanted and is busy elsewhere): when the owning comm is not
// inside a call (Comm::tryPin), the thread has it adopt the sockets itself.
// Lock order: a comm's call mutex, then the hub's; the thread only ever
// try-locks a comm, under the hub's mutex, so it cannot deadlock with a
// comm that calls in or is being destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "transports/netsocket/net_comm.h"

namespace ferry::netsocket {

class Hub {
 public:
  Hub(Socket listener, uint64_t nonce, const Config& cfg)
      : listener_(std::move(listener)), nonce_(nonce), cfg_(cfg) {}
  ~Hub();
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  const Config& config() const { return cfg_; }
  const SockAddr& addr() const { return listener_.peer(); }
  // More listening sockets (retry on: the host's other devices, for rail
  // failover); call before start(). Their bound addresses, in order:
  void addListener(Socket s) { alts_.push_back(std::move(s)); }
  std::vector<SockAddr> altAddrs() const;

  // The helper thread (retry on only).
  Status start();
  // Accept whatever the kernel has queued and read hellos; never blocks.
  Status poll();
  // A complete new connection (its owner is then enrolled when retry is on).
  // *alive: the sender process's sentinel (net_alive.h), invalid if none.
  bool takeNew(std::vector<Socket>* socks, uint64_t* connId, SockAddr* alive);
  // The comm created for connId (retry on): the helper thread may resume it.
  void enroll(uint64_t connId, Comm* owner);
  // The complete resume of connId newer than `epoch`, if one arrived.
  bool takeResume(uint64_t connId, uint32_t epoch, std::vector<Socket>* socks, uint32_t* got);
  // The comm owning connId is gone: its resumes are refused from now on.
  void leave(uint64_t connId);
  // The ListenComm is gone: new connections are refused from now on.
  void closeListen();

 private:
  struct Pending {
    Socket sock;
    Hello hello{};
    size_t got = 0;
  };
  struct Group {
    std::vector<Socket> socks;  // by hello index
    int have = 0;
    uint32_t epoch = 0;
    uint32_t alivePort = 0;  // the control socket's hello's (net_alive.h)
  };

  void run();
  int waitMs();
  void deliverResumes();
  Status acceptQueued();
  Status acceptFrom(const Socket& listener);
  Result<bool> readHello(Pending& p);
  Status admit(Pending& p);
  Status place(Group& g, Pending& p);
  void refuseResume(Pending& p);

  std::mutex mu_;
  Socket listener_;
  std::vector<Socket> alts_;  // addListener()
  uint64_t nonce_;
  Config cfg_;
  bool listenOpen_ = true;
  std::vector<Pending> pending_;
  std::map<uint64_t, Group> fresh_;    // new connections by connId
  std::map<uint64_t, Group> resumes_;  // by connId
  std::map<uint64_t, Comm*> owners_;   // live recv comms by connId (retry on; null until enrolled)
  std::thread thread_;
  int wakeFd_ = -1;
  std::atomic<bool> stop_{false};
};

}  // namespace ferry::netsocket
