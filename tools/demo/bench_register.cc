#include "tools/demo/bench_register.h"

#include <algorithm>
#include <cstring>

#include "tools/demo/bench_nccl.h"

namespace ferry::bench {

RegisteredBuffers::~RegisteredBuffers() {
  for (const Buffer& b : bufs_) ncclOk(ncclMemFree(b.base), nullptr, rank_, "ncclMemFree");
}

void* RegisteredBuffers::alloc(size_t bytes, bool zero) {
  bytes = std::max<size_t>((bytes + 63) / 64 * 64, 64);  // ncclMemAlloc refuses 0
  void* p = nullptr;
  if (!ncclOk(ncclMemAlloc(&p, bytes), nullptr, rank_, "ncclMemAlloc")) return nullptr;
  if (zero) std::memset(p, 0, bytes);  // page faults stay out of the timed loop
  bufs_.push_back({p, bytes, nullptr, nullptr});
  return p;
}

bool RegisteredBuffers::registerAll(ncclComm_t comm) {
  for (Buffer& b : bufs_) {
    if (mode_ == kRegisterLocal &&
        !ncclOk(ncclCommRegister(comm, b.base, b.bytes, &b.handle), comm, rank_,
                "ncclCommRegister")) {
      return false;
    }
    if (mode_ == kRegisterWindow &&
        !ncclOk(ncclCommWindowRegister(comm, b.base, b.bytes, &b.win, NCCL_WIN_COLL_SYMMETRIC),
                comm, rank_, "ncclCommWindowRegister")) {
      return false;
    }
  }
  return true;
}

bool RegisteredBuffers::deregisterAll(ncclComm_t comm) {
  bool ok = true;
  for (Buffer& b : bufs_) {
    if (b.handle != nullptr) {
      ok = ncclOk(ncclCommDeregister(comm, b.handle), comm, rank_, "ncclCommDeregister") && ok;
    }
    if (b.win != nullptr) {
      ok = ncclOk(ncclCommWindowDeregister(comm, b.win), comm, rank_,
                  "ncclCommWindowDeregister") &&
           ok;
    }
    b.handle = nullptr;
    b.win = nullptr;
  }
  return ok;
}

}  // namespace ferry::bench
