// An in-process ncclNet_v11_t for testing NetConnection without a network.
// Listen handles name a listener; connect/accept pair up through it. A
// channel matches isends with posted irecvs in order and copies the bytes.
// Knobs inject what real plugins do: NULL requests ("not now") on the first
// calls, and failures.
#pragma once

#include <nccl_net.h>

namespace ferry::fakenet {

struct Knobs {
  int nullIsends = 0;     // the next N isend calls return a NULL request
  int nullIrecvs = 0;     // the next N irecv calls return a NULL request
  int nullConnects = 0;   // connect/accept answer "not yet" N times each
  bool failTests = false; // test() returns ncclRemoteError
};

Knobs& knobs();
const ncclNet_v11_t* net();
// Channels opened and not closed (leak check).
int openComms();
// Comms closed while a request was in flight (posted and not yet tested
// complete), and a reset for it.
int inflightCloses();
void resetInflightCloses();

}  // namespace ferry::fakenet
