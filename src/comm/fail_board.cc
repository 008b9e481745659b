#include "comm/fail_board.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdio>

#include "comm/host_shared.h"

namespace ferry {

struct FailureBoard::Page {
  std::atomic<uint32_t> state;  // 0 empty, 1 being written, 2 posted
  int32_t rank;
  int32_t code;
  char message[500];
};

Result<std::unique_ptr<FailureBoard>> FailureBoard::open(uint64_t commHash) {
  static_assert(sizeof(Page) <= 4096, "one page");
  FERRY_ASSIGN(HostShared m, openHostShared(commHash, "board", sizeof(Page)));
  return std::unique_ptr<FailureBoard>(new FailureBoard(static_cast<Page*>(m.data), m.name));
}

FailureBoard::~FailureBoard() { munmap(page_, sizeof(Page)); }

void FailureBoard::unlink() { shm_unlink(name_.c_str()); }

void FailureBoard::post(int rank, const Status& st) {
  uint32_t empty = 0;
  if (!page_->state.compare_exchange_strong(empty, 1, std::memory_order_acq_rel)) return;
  page_->rank = rank;
  page_->code = static_cast<int32_t>(st.code());
  snprintf(page_->message, sizeof(page_->message), "%s", st.message().c_str());
  page_->state.store(2, std::memory_order_release);
}

Status FailureBoard::check(int self) const {
  if (page_->state.load(std::memory_order_acquire) != 2 || page_->rank == self) return Status::ok();
  auto code = static_cast<Code>(page_->code);
  if (code != Code::kInvalidUsage) code = Code::kRemote;
  return Status(code, "rank " + std::to_string(page_->rank) + " failed: " + page_->message);
}

}  // namespace ferry
