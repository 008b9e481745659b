// Exporting NCCL entry points.
//
// libnccl.so.2 exports every public function twice, at one address:
//   ncclX   weak   (nm: W)  - what applications call;
//   pncclX  strong (nm: T)  - the profiling twin, PMPI-style: a tool may define
//                             its own strong ncclX, do its work and call pncclX.
// Ferry does the same. The library is built with -fvisibility=hidden and
// src/api/ferry.map hides everything not named nccl*/pnccl*/ferry*, so a
// function is exported only if it is defined through one of these macros (or
// declared FERRY_API in include/ferry/ferry.h).
//
// Usage, in a .cc file that includes <nccl.h> and this header:
//
//   FERRY_EXPORT(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count)) {
//     if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
//     ...
//     return ncclSuccess;
//   }
//
// This defines pncclCommCount (strong, default visibility) with the body that
// follows and makes ncclCommCount a weak alias of it. Include the header that
// declares the function (nccl.h or ferry/nccl_device_host.h): the compiler
// then rejects a return type or parameter list that differs from it, since
// two C functions cannot share a name. Use the macros at global scope, once
// per name in the whole library. Inside the library, call the internal C++
// function (or the p-name), never ncclX, so a profiler's ncclX is not
// re-entered.
//
// FERRY_EXPORT_STRONG(ret, name, params) exports a single strong symbol with
// no twin: ncclResetDebugInitInternal, and ferry* extensions not declared
// with FERRY_API.
//
// Entry points must not let a C++ exception escape into C callers: keep them
// thin and convert Status to ncclResult_t at this edge.
#pragma once

#define FERRY_VISIBLE_ __attribute__((visibility("default")))

#define FERRY_EXPORT(ret, name, params)                                             \
  extern "C" FERRY_VISIBLE_ ret p##name params;                                     \
  extern "C" FERRY_VISIBLE_ __attribute__((weak, alias("p" #name))) ret name params; \
  extern "C" FERRY_VISIBLE_ ret p##name params

#define FERRY_EXPORT_STRONG(ret, name, params) \
  extern "C" FERRY_VISIBLE_ ret name params;   \
  extern "C" FERRY_VISIBLE_ ret name params
