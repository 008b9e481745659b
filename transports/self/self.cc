// Loopback: a rank's sends to itself (ncclSend/ncclRecv with peer == rank).
// Pieces go through an in-process ring of slots; large ones by reference.
#include <cstring>
#include <memory>
#include <vector>

#include "transports/self/self.h"

namespace ferry {
namespace {

class LoopbackConnection : public Connection {
 public:
  LoopbackConnection(size_t slots, size_t slotBytes)
      : slotBytes_(slotBytes), data_(slots * slotBytes), pieces_(slots) {}

  Status trySend(SendSlot* out) override {
    *out = SendSlot{};
    if (tail_ - head_ == pieces_.size()) return Status::ok();
    out->data = data_.data() + (tail_ % pieces_.size()) * slotBytes_;
    out->capacity = slotBytes_;
    return Status::ok();
  }
  Status commitSend(size_t bytes) override {
    RecvPiece& p = pieces_[tail_ % pieces_.size()];
    p = RecvPiece{true, false, data_.data() + (tail_ % pieces_.size()) * slotBytes_, bytes};
    tail_++;
    return Status::ok();
  }
  bool supportsRef() const override { return true; }
  Status sendRef(const void* src, size_t bytes, bool* accepted) override {
    *accepted = tail_ - head_ < pieces_.size();
    if (*accepted) pieces_[tail_++ % pieces_.size()] = RecvPiece{true, true, src, bytes};
    return Status::ok();
  }
  Status tryRecv(RecvPiece* out) override {
    *out = head_ == tail_ ? RecvPiece{} : pieces_[head_ % pieces_.size()];
    return Status::ok();
  }
  Status readRef(const RecvPiece& piece, size_t offset, void* dst, size_t bytes) override {
    std::memmove(dst, static_cast<const char*>(piece.data) + offset, bytes);
    return Status::ok();
  }
  Status releaseRecv() override {
    head_++;
    return Status::ok();
  }
  bool sendsDrained() override { return head_ == tail_; }
  bool needsPush() const override { return false; }
  std::string describe() const override { return "loopback"; }

 private:
  size_t slotBytes_;
  std::vector<char> data_;
  std::vector<RecvPiece> pieces_;
  size_t head_ = 0, tail_ = 0;
};

}  // namespace

bool SelfTransport::canConnect(const CommContext&, const PeerInfo& self,
                               const PeerInfo& peer) const {
  return self.rank == peer.rank;
}

Result<std::unique_ptr<Connection>> SelfTransport::connect(const CommContext&, int) {
  return std::unique_ptr<Connection>(new LoopbackConnection(8, 1 << 17));
}

}  // namespace ferry
