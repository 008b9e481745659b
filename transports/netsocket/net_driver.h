// Driver: one thread per process that keeps a send comm going while its
// caller makes no calls (retry on). A send of an inline message completes
// once written and copied aside (net_retry.h); the caller may then stop
// calling, yet a break can still lose those bytes on the way. Ferry's
// executor (and NCCL) count on "completed = reaches the peer without more
// calls here", so every send comm with retry on is watched for its life:
// its control socket is polled for a hang-up or an error (never for acks,
// which the caller reads), and a comm not inside a call (tryPin) is then
// stepped from here, which reconnects and resends. Watching from creation,
// not only while copies exist, keeps the set still: no wake-up per change.
//
// Lock order as for the Hub: a comm's call mutex, then the Driver's; the
// thread only try-locks comms, under its own mutex.
#pragma once

namespace ferry::netsocket {

class Comm;

class Driver {
 public:
  // c was created (watch), or failed, was closed by its peer or is going
  // away (unwatch); under c's call mutex once c is shared.
  static void watch(Comm* c);
  static void unwatch(Comm* c);
};

}  // namespace ferry::netsocket
