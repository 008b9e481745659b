// NetConnection (see net_connection.h).
#include "transports/net/net_connection.h"

#include "core/log.h"

namespace ferry::net {

const char* resultName(ncclResult_t r) {
  switch (r) {
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "unknown result";
  }
}

Status pluginStatus(ncclResult_t r, const char* call, const std::string& where) {
  if (r == ncclSuccess) return Status::ok();
  std::string msg = std::string("network ") + call + " failed (" + resultName(r) + " " +
                    std::to_string(static_cast<int>(r)) + ") on " + where;
  switch (r) {
    case ncclRemoteError: return remoteError(msg);
    case ncclSystemError: return systemError(msg);
    case ncclInvalidArgument: return invalidArgument(msg);
    case ncclInvalidUsage: return invalidUsage(msg);
    default: return internalError(msg);
  }
}

NetConnection::NetConnection(const ncclNet_v11_t* net, void* sendComm, void* recvComm, int peer,
                             int slots, size_t slotBytes, std::string describe)
    : net_(net), sendComm_(sendComm), recvComm_(recvComm), peer_(peer), nslots_(slots),
      slotBytes_(slotBytes), describe_(std::move(describe)), send_(slots), recv_(slots) {}

Status NetConnection::check(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return Status::ok();
  if (error_.isOk() && !closing_) {
    // The peer may have said why it closed before it did: a failure notice
    // waiting in a receive we were not reading (we only sent to it).
    Code code = Code::kOk;
    if (noticeArrived(&code)) {
      error_ = noticeStatus(code);
      return error_;
    }
  }
  if (error_.isOk()) {
    error_ = pluginStatus(r, call, describe_);
    // At close, a peer that exited without destroying its side is expected.
    if (closing_) FERRY_INFO(log::kNet, "net: close exchange: %s", error_.message().c_str());
    else FERRY_WARN("%s", error_.message().c_str());
  }
  return error_;
}

Status NetConnection::init() {
  for (Slot& s : send_) {
    s.buf.resize(slotBytes_);
    FERRY_TRY(check(net_->regMr(sendComm_, s.buf.data(), slotBytes_, NCCL_PTR_HOST, &s.mh), "regMr"));
  }
  for (Slot& s : recv_) {
    s.buf.resize(slotBytes_);
    FERRY_TRY(check(net_->regMr(recvComm_, s.buf.data(), slotBytes_, NCCL_PTR_HOST, &s.mh), "regMr"));
  }
  return postRecvs();
}

NetConnection::~NetConnection() {
  if (error_.isOk() && closeExchange_) drainAtClose();
  closeComms();
}

int NetConnection::requestsInFlight() const {
  int n = 0;
  for (const Slot& s : send_) n += s.req != nullptr;
  for (int i = 0; i < recvPosted_; ++i) n += !recv_[(recvHead_ + i) % nslots_].done;
  return n;
}

// Closing frees what the plugin still holds; see the header on when requests
// can be in flight here.
void NetConnection::closeComms() {
  if (!sendComm_ && !recvComm_) return;
  int inFlight = requestsInFlight();
  if (inFlight > 0) {
    if (error_.isOk() && closeExchange_ && !(abortFlag_ && abortFlag_->load())) {
      FERRY_WARN("net: closing %s with %d requests in flight (the close exchange did not finish)",
                 describe_.c_str(), inFlight);
    } else {
      FERRY_INFO(log::kNet, "net: closing %s connection %s with %d requests in flight",
                 closeExchange_ ? "failed" : "in-process", describe_.c_str(), inFlight);
    }
  }
  if (sendComm_) {
    for (Slot& s : send_)
      if (s.mh) net_->deregMr(sendComm_, s.mh);
    net_->closeSend(sendComm_);
  }
  if (recvComm_) {
    for (Slot& s : recv_)
      if (s.mh) net_->deregMr(recvComm_, s.mh);
    net_->closeRecv(recvComm_);
  }
  for (Slot& s : send_) s.mh = s.req = nullptr;
  for (Slot& s : recv_) s.mh = s.req = nullptr;
  sendComm_ = recvComm_ = nullptr;
}

Status NetConnection::trySend(SendSlot* out) {
  *out = SendSlot{};
  FERRY_TRY(error_);
  if (slotOut_) return internalError("net: trySend twice without commitSend");
  if (sendCount_ == nslots_) {
    FERRY_TRY(progress());
    if (sendCount_ == nslots_) return Status::ok();
  }
  Slot& s = send_[(sendHead_ + sendCount_) % nslots_];
  out->data = s.buf.data();
  out->capacity = slotBytes_;
  slotOut_ = true;
  return Status::ok();
}

Status NetConnection::commitSend(size_t bytes) {
  FERRY_TRY(error_);
  if (!slotOut_ || bytes > slotBytes_) return internalError("net: commitSend without a slot");
  send_[(sendHead_ + sendCount_) % nslots_].size = bytes;
  sendCount_++;
  slotOut_ = false;
  return postSends();
}

Status NetConnection::postSends() {
  while (sendPosted_ < sendCount_) {
    Slot& s = send_[(sendHead_ + sendPosted_) % nslots_];
    void* req = nullptr;
    FERRY_TRY(check(net_->isend(sendComm_, s.buf.data(), s.size, 0, s.mh, nullptr, &req), "isend"));
    if (!req) break;  // the network cannot take it now
    s.req = req;
    sendPosted_++;
  }
  return Status::ok();
}

Status NetConnection::testSends() {
  while (sendPosted_ > 0) {
    Slot& s = send_[sendHead_];
    int done = 0;
    FERRY_TRY(check(net_->test(s.req, &done, nullptr), "test(send)"));
    if (!done) break;
    s.req = nullptr;
    sendHead_ = (sendHead_ + 1) % nslots_;
    sendCount_--;
    sendPosted_--;
  }
  return Status::ok();
}

// A receive that cannot be posted (the peer closed after its last send) is
// an error only once no earlier receive is left: pieces posted ahead may
// still complete and must not be lost.
Status NetConnection::postRecvs() {
  while (recvPosted_ < nslots_ && !recvPostFailed_ && recvBudget_ != 0) {
    Slot& s = recv_[(recvHead_ + recvPosted_) % nslots_];
    void* data = s.buf.data();
    size_t size = slotBytes_;
    int tag = 0;
    void* req = nullptr;
    ncclResult_t r = net_->irecv(recvComm_, 1, &data, &size, &tag, &s.mh, nullptr, &req);
    if (r != ncclSuccess) {
      recvPostFailed_ = r;
      break;
    }
    if (!req) break;
    s.req = req;
    s.done = false;
    recvPosted_++;
    if (recvBudget_ > 0) recvBudget_--;
  }
  if (recvPosted_ == 0 && recvPostFailed_) return check(recvPostFailed_, "irecv");
  return Status::ok();
}

Status NetConnection::tryRecv(RecvPiece* out) {
  *out = RecvPiece{};
  FERRY_TRY(error_);
  FERRY_TRY(postRecvs());
  if (recvPosted_ == 0) return Status::ok();
  Slot& s = recv_[recvHead_];
  if (!s.done) {
    int done = 0;
    int size = 0;
    FERRY_TRY(check(net_->test(s.req, &done, &size), "test(recv)"));
    if (!done) {
      // Our own sends may be what the peer waits for before it sends again.
      return postSends().isOk() ? testSends() : error_;
    }
    s.req = nullptr;
    s.done = true;
    s.size = static_cast<size_t>(size);
    FERRY_TRY(controlMessage(s.buf.data(), s.size));
  }
  out->ready = true;
  out->data = s.buf.data();
  out->size = s.size;
  return Status::ok();
}

Status NetConnection::releaseRecv() {
  FERRY_TRY(error_);
  if (recvPosted_ == 0 || !recv_[recvHead_].done) return internalError("net: releaseRecv without a piece");
  recv_[recvHead_].done = false;
  recvHead_ = (recvHead_ + 1) % nslots_;
  recvPosted_--;
  return postRecvs();
}

// A failed connection is never drained: its next progress() reports the error.
bool NetConnection::sendsDrained() {
  if (sendCount_ > 0 && error_.isOk()) (void)progress();
  return sendCount_ == 0 && error_.isOk();
}

Status NetConnection::progress() {
  FERRY_TRY(error_);
  FERRY_TRY(postSends());
  FERRY_TRY(testSends());
  return postRecvs();
}

void NetConnection::markFailed() {
  if (error_.isOk()) error_ = remoteError("net connection " + describe_ + " was marked failed");
  // Closing makes the peer's requests fail at once instead of timing out.
  closeComms();
}

}  // namespace ferry::net
