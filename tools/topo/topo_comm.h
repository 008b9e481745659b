// ferry-topo --comm and --calibrate: the communicator's view (CommView) as a
// live communicator builds it, and the host calibration it starts from.
#pragma once

namespace ferry::topo {

// Creates a communicator and prints rank 0's view (viewTable, or with
// `json` ferryCommViewJson's output). nranks > 0: fork that many local
// ranks; 0: one rank of an external launcher when its rank/size variables
// and NCCL_COMM_ID are set, else 2 forked ranks. Returns the exit status.
int runComm(int nranks, bool json);

// Measures this host (with the two-process ping-pong), writes the
// calibration file and prints what it wrote. Returns the exit status.
int runCalibrate();

}  // namespace ferry::topo
