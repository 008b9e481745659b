// The bootstrap root: a detached thread that serves one rendezvous.
//
// Which check-ins the root believes (a peer that knows the secret may still
// send nonsense):
//  - A check-in whose rank/nranks are out of range (nranks outside
//    [1, kMaxRanks], rank outside [0, nranks)) is bogus: that connection is
//    refused (ncclInvalidArgument on its side) and nothing else changes.
//  - The communicator's size is known when rank 0 runs in the root's process
//    (ncclGetUniqueId on rank 0, NCCL_COMM_ID, ncclCommSplit): rank 0 tells
//    the root (expectRanks / startRoot's nranks) before it checks in. A
//    check-in with another nranks is then refused at once (ncclInvalidUsage).
//  - Otherwise check-ins are grouped by the nranks they claim, and the first
//    group to fill all its ranks wins; members of other groups are refused.
//    (So without rank 0 in the root's process, a forged check-in claiming
//    rank 0 of 1 would take the root; anyone with the secret can deny
//    service anyway, e.g. by checking in first as a real rank number.)
//  - A second check-in for a rank already present is refused (ncclInvalidUsage).
// A refused mismatch or duplicate is a problem only if genuine ranks stop
// arriving: when the rendezvous is still incomplete kGraceMs after the last
// accepted check-in (or the problem, if later), the root fails every waiting
// rank with the problem's reason instead of letting them wait for the
// deadline. So a forged check-in while the real ranks keep arriving does not
// stop creation (unless the real ranks arrive more than kGraceMs apart), and a
// real mismatch fails all ranks within a second.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "net/socket.h"

namespace ferry::bootstrap {

constexpr int64_t kGraceMs = 500;

// Take over `listener` and serve the rendezvous of `secret` on a detached
// thread until every rank checked in, the rendezvous failed, or `timeoutMs`
// passed. nranks > 0: the communicator's size (the caller is rank 0). The
// thread owns all of its state, so it may outlive the caller.
Status startRoot(Socket listener, uint64_t secret, int64_t timeoutMs, int nranks = 0);

// If this process runs the root of (secret, rootAddr) and it does not know
// the communicator's size yet, tell it: nranks. Rank 0 calls this.
void expectRanks(uint64_t secret, const SockAddr& rootAddr, int nranks);

// If this process runs the root of (secret, rootAddr) and it is sending its
// final answers, wait (up to timeoutMs) until it is done: a rank that got its
// answer first must not let the process exit before the others got theirs.
void waitForRootReplies(uint64_t secret, const SockAddr& rootAddr, int64_t timeoutMs);

}  // namespace ferry::bootstrap
