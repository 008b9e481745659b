/*
 * ferry/view.h: the communicator's view, as Ferry's algorithms see it.
 *
 * A C-callable Ferry extension (exported as ferry*, see ferry.h): what the
 * communicator learnt at creation about its ranks' hosts, local ranks and
 * rails, the cost model's per-level latency and bandwidth, its rings, and
 * where this host's calibration came from. `ferry-topo --comm` prints the
 * same view.
 */
#ifndef FERRY_VIEW_H_
#define FERRY_VIEW_H_

#include <stddef.h>

#include <ferry/ferry.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the view of `comm` into buf as one JSON object, NUL-terminated:
 *   {"nranks": N,
 *    "hosts": [{"host": 0, "ranks": [0, 1]}, ...],
 *    "ranks": [{"rank": 0, "host": 0, "localRank": 0, "rail": 0, "nic": "eth0"}, ...],
 *    "nRails": R,
 *    "levels": {"self"|"intra"|"inter":
 *               {"latencyUs": x, "bandwidthGBs": y, "overheadUs": z}},
 *    "reduceGBs": x, "oversubscription": x, "chunkBytes": n, "allLocal": b,
 *    "rings": [[rank, ...], ...],          (ring position -> rank, per ring)
 *    "calibration": "measured" | "file <path>" | "defaults"}
 * Numbers that are unknown are null. *len is in: the size of buf; out: the
 * bytes the view needs, terminating NUL included (set on every call with a
 * valid comm and len, so a first call with buf = NULL and *len = 0 asks the
 * size). ncclInvalidArgument (with a WARN) when comm, len or buf is NULL or
 * buf is too small; ncclInvalidUsage while comm is still initializing or
 * after it failed. The view is the same on every rank of comm except
 * "calibration", which is this process's. */
FERRY_API ncclResult_t ferryCommViewJson(ncclComm_t comm, char* buf, size_t* len);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FERRY_VIEW_H_ */
