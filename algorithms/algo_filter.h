// NCCL_ALGO and NCCL_PROTO, parsed once per communicator (at creation).
//
// The syntax is NCCL's (graph/tuning.cc): a ';'-separated list of
// `[coll:]list` clauses. A list is comma-separated names, or `^names` to
// allow every name but those. Only the first clause may omit the collective
// prefix and then applies to every collective; a later `coll:list` replaces
// the set for that collective. Prefixes are NCCL's: Broadcast, Reduce,
// AllGather, ReduceScatter, AllReduce. Names and prefixes match
// case-insensitively, blanks around them are ignored, empty items (`ring,`,
// a trailing `;`) are skipped as NCCL's strtok skips them.
//
// An unknown name or prefix, a prefix missing after the first clause, an
// empty list after `coll:` or a second ':' is an invalidUsage Status naming
// the token, so ncclCommInitRank fails on every rank (all read the same
// environment) instead of silently running something else.
//
// Collectives NCCL's syntax cannot name (AlltoAll, Gather, Scatter,
// Send/Recv) are not restricted by an unprefixed list: NCCL_ALGO does not
// apply to them in NCCL. Ferry's extension: an "AlltoAll:" clause restricts
// AlltoAll and ferryAlltoAllv (rail or direct), e.g. "AlltoAll:direct".
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "algorithms/schedule.h"
#include "core/status.h"

namespace ferry {

class CollFilter {
 public:
  // Allows every name for every collective (the variable is unset).
  CollFilter();

  // `names` is the vocabulary (at most 32 names; the span must outlive the
  // filter); `var` is the variable name used in error messages.
  static Result<CollFilter> parse(std::string_view value, std::span<const char* const> names,
                                  const char* var);

  // Whether `name` (case-insensitive; a name outside the vocabulary is never
  // allowed) may run `kind`.
  bool allows(CollKind kind, std::string_view name) const;
  // True when nothing is restricted.
  bool unrestricted() const;

 private:
  static constexpr int kColls = 6;  // NCCL's nameable collectives and AlltoAll
  uint32_t all() const;
  int indexOf(std::string_view name) const;

  std::span<const char* const> names_;
  std::array<uint32_t, kColls> enabled_{};
};

// Algorithm names NCCL_ALGO accepts: Ferry's registry (direct, ring) and
// NCCL's (Tree, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT). NCCL's
// names Ferry lacks are accepted so an NCCL user's setting does not break
// creation; selection then falls back to what Ferry has (algorithm.h).
std::span<const char* const> algoNames();
// NCCL's protocols: LL, LL128, Simple.
std::span<const char* const> protoNames();

// NCCL_ALGO's value parsed; an INFO line (TUNING) when it allows only
// algorithms Ferry does not have for some collective.
Result<CollFilter> parseAlgoFilter(std::string_view value);
// NCCL_PROTO's value validated. Ferry has one protocol on host memory,
// plain copies into the peer's buffer with a step counter, i.e. NCCL's
// Simple; LL and LL128 exist for GPU store atomicity and mean Simple here.
// An INFO line says so when the value is set.
Result<CollFilter> parseProtoFilter(std::string_view value);

}  // namespace ferry
