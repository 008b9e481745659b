#include "comm/alltoallv_call.h"

#include <algorithm>
#include <string>

#include "algorithms/builders.h"
#include "algorithms/tuner.h"
#include "comm/comm.h"
#include "core/log.h"

namespace ferry {

AlltoAllvCall::AlltoAllvCall(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                             void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                             int nranks, size_t elemSize)
    : send_(sendbuff), recv_(recvbuff), n_(nranks), elt_(elemSize),
      mine_(2 * static_cast<size_t>(nranks)), all_(2 * static_cast<size_t>(nranks) * nranks),
      sdispls_(sdispls, sdispls + nranks), rdispls_(rdispls, rdispls + nranks) {
  std::copy(sendcounts, sendcounts + nranks, mine_.begin());
  std::copy(recvcounts, recvcounts + nranks, mine_.begin() + nranks);
}

CollArgs AlltoAllvCall::gatherArgs(int rank) const {
  CollArgs a;
  a.kind = CollKind::kAllGather;
  a.rank = rank;
  a.nranks = n_;
  a.count = 2 * static_cast<size_t>(n_);
  a.elemSize = sizeof(uint64_t);
  return a;
}

Status AlltoAllvCall::checkPairs() const {
  const size_t row = 2 * static_cast<size_t>(n_);
  for (int s = 0; s < n_; ++s)
    for (int d = 0; d < n_; ++d) {
      uint64_t sent = all_[s * row + d], expected = all_[d * row + n_ + s];
      if (sent == expected) continue;
      return invalidArgument("rank " + std::to_string(s) + " sends " +
                             std::to_string(sent) + " elements to rank " + std::to_string(d) +
                             " (its sendcounts[" + std::to_string(d) + "]) but rank " +
                             std::to_string(d) + " expects " + std::to_string(expected) +
                             " (its recvcounts[" + std::to_string(s) +
                             "]); every pair's counts must agree");
    }
  return Status::ok();
}

Result<Executor*> AlltoAllvCall::prepare(Comm* c) {
  FERRY_TRY(checkPairs());
  const int me = c->rank();
  const size_t row = 2 * static_cast<size_t>(n_);
  AlltoAllvMatrix m;
  m.n = n_;
  m.bytes.resize(static_cast<size_t>(n_) * n_);
  double total = 0;
  for (int s = 0; s < n_; ++s)
    for (int d = 0; d < n_; ++d) {
      m.bytes[s * static_cast<size_t>(n_) + d] = all_[s * row + d] * elt_;
      total += static_cast<double>(m.bytes[s * static_cast<size_t>(n_) + d]);
    }
  for (int p = 0; p < n_; ++p) {
    m.sendOff.push_back(sdispls_[p] * elt_);
    m.recvOff.push_back(rdispls_[p] * elt_);
  }
  // Every rank sees the same matrix, so every rank makes the same choice:
  // the one an AlltoAll of the mean block gets (cost model, NCCL_ALGO, a
  // tuner plugin).
  CollArgs a;
  a.kind = CollKind::kAllToAll;
  a.rank = me;
  a.nranks = n_;
  a.elemSize = elt_;
  a.count = std::max<size_t>(1, static_cast<size_t>(total / n_ / n_) / elt_);
  Result<Choice> ch = chooseAlgorithm(a, c->view(), c->algoFilter(), c->externalTuner());
  bool rail = ch.isOk() && std::string(ch.value().algo->name) == "rail" && railvSupports(c->view());
  FERRY_INFO(log::kTuning, "AlltoAllv mean block %zu bytes: algorithm %s", a.count * elt_,
             rail ? "rail" : "direct");
  Schedule s = rail ? railvSchedule(me, c->view(), m) : directvSchedule(me, m);
  std::vector<void*> bufs = {const_cast<void*>(send_), recv_};
  exec_ = std::make_unique<Executor>(std::move(s), std::move(bufs), 1, ReduceSpec{}, c->execOptions());
  return exec_.get();
}

}  // namespace ferry
