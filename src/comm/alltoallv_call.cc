#include "comm/alltoallv_call.h"

#include <string>

#include "algorithms/builders.h"
#include "comm/comm.h"

namespace ferry {
namespace {

// The swap: H counts to and from every other local rank.
Schedule swapSchedule(int me, const CommView& v) {
  const int h = v.hostOf[me], H = v.nHosts();
  const size_t bytes = sizeof(uint64_t) * H;
  Schedule s{"countswap", {}};
  const std::vector<int>& mine = v.hostRanks[h];
  for (size_t j = 0; j < mine.size(); ++j) {
    if (mine[j] == me) continue;
    s.lanes.push_back(Lane{{recvStep(mine[j], {kOutputBuf, j * bytes}, bytes)}});
    s.lanes.push_back(Lane{{sendStep(mine[j], {kInputBuf, j * bytes}, bytes)}});
  }
  return s;
}

}  // namespace

AlltoAllvCall::AlltoAllvCall(Comm* c, const void* sendbuff, const size_t* sendcounts,
                             const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                             const size_t* rdispls, size_t elemSize)
    : send_(sendbuff), recv_(recvbuff), n_(c->nranks()), elt_(elemSize),
      sendcounts_(sendcounts, sendcounts + n_), recvcounts_(recvcounts, recvcounts + n_),
      sdispls_(sdispls, sdispls + n_), rdispls_(rdispls, rdispls + n_) {
  const CommView& v = c->view();
  const int H = v.nHosts(), L = static_cast<int>(v.hostRanks[0].size());
  out_.assign(static_cast<size_t>(L) * H, 0);
  in_.assign(out_.size(), 0);
  for (int j = 0; j < L; ++j)
    for (int g = 0; g < H; ++g) out_[j * H + g] = sendcounts_[v.hostRanks[g][j]];
  swap_ = std::make_unique<Executor>(swapSchedule(c->rank(), v),
                                     std::vector<void*>{out_.data(), in_.data()}, 1, ReduceSpec{},
                                     c->execOptions());
}

// The entries of the byte matrix this rank's schedule reads: its own row
// (sendcounts), its column (recvcounts) and what local peers send its rail
// peers (swapped). Local pairs into this rank are checked both ways.
Status AlltoAllvCall::fillMatrix(Comm* c, AlltoAllvMatrix* m) const {
  const CommView& v = c->view();
  const int me = c->rank(), h = v.hostOf[me], i = v.localRankOf[me], H = v.nHosts();
  m->n = n_;
  m->bytes.assign(static_cast<size_t>(n_) * n_, 0);
  auto mismatch = [&](int src, uint64_t sent, uint64_t expected) {
    return invalidArgument("rank " + std::to_string(src) + " sends " + std::to_string(sent) +
                           " elements to rank " + std::to_string(me) + " (its sendcounts[" +
                           std::to_string(me) + "]) but rank " + std::to_string(me) + " expects " +
                           std::to_string(expected) + " (its recvcounts[" + std::to_string(src) +
                           "]); every pair's counts must agree");
  };
  if (sendcounts_[me] != recvcounts_[me]) return mismatch(me, sendcounts_[me], recvcounts_[me]);
  for (int p = 0; p < n_; ++p) {
    m->bytes[static_cast<size_t>(me) * n_ + p] = sendcounts_[p] * elt_;
    m->bytes[static_cast<size_t>(p) * n_ + me] = recvcounts_[p] * elt_;
  }
  const std::vector<int>& mine = v.hostRanks[h];
  for (size_t j = 0; j < mine.size(); ++j) {
    if (mine[j] == me) continue;
    for (int g = 0; g < H; ++g) {
      uint64_t count = in_[j * H + g];
      int dst = v.hostRanks[g][i];
      if (dst == me && count != recvcounts_[mine[j]]) return mismatch(mine[j], count, recvcounts_[mine[j]]);
      m->bytes[static_cast<size_t>(mine[j]) * n_ + dst] = count * elt_;
    }
  }
  for (int p = 0; p < n_; ++p) {
    m->sendOff.push_back(sdispls_[p] * elt_);
    m->recvOff.push_back(rdispls_[p] * elt_);
  }
  return Status::ok();
}

Result<Executor*> AlltoAllvCall::prepare(Comm* c) {
  AlltoAllvMatrix m;
  FERRY_TRY(fillMatrix(c, &m));
  exec_ = std::make_unique<Executor>(railvSchedule(c->rank(), c->view(), m),
                                     std::vector<void*>{const_cast<void*>(send_), recv_}, 1,
                                     ReduceSpec{}, c->execOptions());
  return exec_.get();
}

}  // namespace ferry
