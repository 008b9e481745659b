// FailureBoard: how the ranks of one host learn at once that one of them
// failed, and why.
//
// A failure used to travel only over established connections (a flag in the
// pair's shared segment). A rank that failed before it connected to a peer,
// or that exited, left that peer with nothing but "rank X exited" or a
// timeout, and a usage error (ranks running different operations) reached
// far ranks as a remote error. The board is one small shared-memory page per
// communicator and host: the first rank that fails posts its code and
// message; every wait of every rank on the host reads it (one atomic load)
// and fails with the same code, naming the rank that failed first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace ferry {

class FailureBoard {
 public:
  // Opens (creating if needed) the board of communicator `commHash` on this
  // host. Every local rank must open it before any of them calls unlink().
  static Result<std::unique_ptr<FailureBoard>> open(uint64_t commHash);
  ~FailureBoard();
  FailureBoard(const FailureBoard&) = delete;
  FailureBoard& operator=(const FailureBoard&) = delete;

  // Removes the name (the mapping stays): after every local rank opened it.
  void unlink();
  // Records the first failure of any rank on this host; later ones are ignored.
  void post(int rank, const Status& st);
  // Ok, or the failure another rank posted.
  Status check(int self) const;

 private:
  struct Page;
  FailureBoard(Page* page, std::string name) : page_(page), name_(std::move(name)) {}
  Page* page_;
  std::string name_;
};

}  // namespace ferry
