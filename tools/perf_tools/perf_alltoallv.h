// alltoallv_perf's traffic pattern, with nccl-tests 2.19's semantics:
// - generated (default): each rank sends a total of paramCount*n elements;
//   peer j of rank i gets a blend of the uniform share and a share that
//   grows with the ring distance (j - i) mod n, weighted by
//   NCCL_TESTS_ALLTOALLV_SPREAD (0 uniform .. 1 fully distance-weighted);
// - matrix: NCCL_TESTS_ALLTOALLV_MATRIX_FILE, a square whitespace matrix of
//   bytes i -> j (scaled by NCCL_TESTS_ALLTOALLV_MATRIX_SCALE); -b must equal
//   -e, and -e must hold the largest per-rank send or receive total.
// Every per-peer amount is rounded down to 16 bytes. Bandwidth uses the
// largest per-rank send or receive total; NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY=1
// prints per-rank totals after each row.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry::perf {

struct AlltoallvPattern {
  double spread = 1.0;
  double scale = 1.0;
  bool printSummary = false;
  std::string file;            // "" = generated pattern
  int dim = 0;                 // matrix side
  std::vector<size_t> matrix;  // dim*dim bytes, 16-byte aligned

  bool matrixMode() const { return !file.empty(); }
  // Bytes rank i sends to rank j. totalBytes: a rank's total (generated mode).
  size_t peerBytes(int i, int j, int n, size_t totalBytes) const;
  // The count column (elements per peer before weighting; 0 in matrix mode).
  size_t paramCount(size_t bytes, size_t elt, int n) const;
  // Largest per-rank send and receive totals, in elements.
  void maxCounts(size_t paramCount, size_t elt, int n, size_t* send, size_t* recv) const;
};

// Reads the NCCL_TESTS_ALLTOALLV_* variables (and the matrix file). False
// with a message for an unreadable or malformed matrix.
bool loadAlltoallvPattern(AlltoallvPattern* p, std::string* error);
// Parses matrix text into p->matrix/p->dim, applying p->scale. `name` is for
// messages.
bool parseAlltoallvMatrix(const std::string& text, const std::string& name, AlltoallvPattern* p,
                          std::string* error);
// Run-time checks against the sweep and the rank count ("" when fine).
std::string alltoallvRunError(const AlltoallvPattern& p, size_t minBytes, size_t maxBytes,
                              int nranks);

// The process's pattern (set once by the runner before any rank starts).
AlltoallvPattern& alltoallvPattern();

// Per-peer counts and displacements (elements) of `rank`.
struct AlltoallvPlan {
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
  size_t sendTotal = 0, recvTotal = 0;
};
AlltoallvPlan alltoallvPlan(const AlltoallvPattern& p, size_t paramCount, size_t elt, int n,
                            int rank);

// One AlltoAllv. useExtension: through ferryAlltoAllv when the loaded
// library has it; otherwise (and in place) a group of ncclSend/ncclRecv as
// nccl-tests does.
ncclResult_t runAlltoallv(const void* send, void* recv, size_t paramCount, int type,
                          ncclComm_t comm, int rank, int n, bool useExtension,
                          cudaStream_t stream);
// True when the loaded NCCL library exports ferryAlltoAllv.
bool haveFerryAlltoallv();
// FERRY_PERF_ALLTOALLV_P2P=1: a grouped ncclSend/ncclRecv with a send and a
// receive for every peer, zero counts included (torch's all_to_all_single
// shape), in place of ferryAlltoAllv.
bool alltoallvFullGroup();

// Wrong elements in rank's receive buffer for inputs of seed.
int64_t alltoallvWrong(const AlltoallvPattern& p, const void* recv, size_t paramCount, int type,
                       uint64_t seed, int n, int rank);

// The NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY lines for one row.
std::string alltoallvSummary(const AlltoallvPattern& p, size_t paramCount, size_t elt, int n,
                             double seconds);

}  // namespace ferry::perf
