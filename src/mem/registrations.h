// Buffer registrations (ncclCommRegister / ncclCommDeregister) on host memory.
//
// Host memory needs no pinning, so a registration is a record: which
// communicator, which range. What makes it worth a module is checking: a
// handle is an opaque number, never a pointer Ferry dereferences, so a
// garbage, foreign or twice-deregistered handle is a clear error instead of
// a crash; ncclMemFree of a block that is still registered releases those
// registrations (a later deregister of such a handle succeeds with an INFO
// line); destroying a communicator releases its registrations.
#pragma once

#include <cstddef>

#include "core/status.h"

namespace ferry::mem {

// Records [buff, buff + bytes) for `comm`; the handle names it.
Result<void*> addRegistration(const void* comm, void* buff, size_t bytes);
// Removes `handle`: an error for an unknown handle or another communicator's.
Status removeRegistration(const void* comm, void* handle);
// Releases every registration overlapping [base, base + bytes) (the block
// is being freed); returns how many.
int releaseRegistrationsIn(const void* base, size_t bytes);
// Releases every registration of `comm` (it is being destroyed); returns how many.
int releaseRegistrationsOf(const void* comm);

}  // namespace ferry::mem
