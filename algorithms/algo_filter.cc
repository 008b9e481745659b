#include "algorithms/algo_filter.h"

#include <strings.h>

#include <cstring>
#include <vector>

#include "algorithms/algorithm.h"
#include "core/log.h"

namespace ferry {
namespace {

// NCCL's prefix spelling and order (ncclFunc_t for the five it can filter),
// then Ferry's extension: "AlltoAll:" (AlltoAll and ferryAlltoAllv), which
// only a clause naming it restricts, so NCCL's meaning of an unprefixed
// list (AlltoAll untouched) holds.
constexpr int kNcclColls = 5;
constexpr const char* kCollPrefixes[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                         "AllReduce", "AlltoAll"};
constexpr CollKind kCollKinds[] = {CollKind::kBroadcast, CollKind::kReduce, CollKind::kAllGather,
                                   CollKind::kReduceScatter, CollKind::kAllReduce,
                                   CollKind::kAllToAll};
static_assert(sizeof(kCollKinds) / sizeof(kCollKinds[0]) == 6, "CollFilter::kColls");

// NCCL's algorithm names, accepted so an NCCL user's setting never fails
// creation; "Ring" is also Ferry's.
constexpr const char* kNcclAlgoNames[] = {"Ring", "Tree", "CollNetDirect", "CollNetChain",
                                          "NVLS", "NVLSTree", "PAT"};
constexpr const char* kProtoNames[] = {"LL", "LL128", "Simple"};

bool sameName(std::string_view a, const char* b) {
  return a.size() == strlen(b) && strncasecmp(a.data(), b, a.size()) == 0;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

int collIndex(CollKind k) {
  for (int i = 0; i < 6; i++)
    if (kCollKinds[i] == k) return i;
  return -1;
}

Status bad(const char* var, std::string_view value, const std::string& what) {
  return invalidUsage(std::string(var) + "=\"" + std::string(value) + "\": " + what);
}

}  // namespace

CollFilter::CollFilter() { enabled_.fill(~uint32_t(0)); }

uint32_t CollFilter::all() const {
  return names_.size() >= 32 ? ~uint32_t(0) : (uint32_t(1) << names_.size()) - 1;
}

int CollFilter::indexOf(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); i++)
    if (sameName(name, names_[i])) return static_cast<int>(i);
  return -1;
}

Result<CollFilter> CollFilter::parse(std::string_view value, std::span<const char* const> names,
                                     const char* var) {
  CollFilter f;
  f.names_ = names;
  f.enabled_.fill(f.all());
  bool first = true;
  for (std::string_view clause : split(value, ';')) {
    clause = trim(clause);
    if (clause.empty()) continue;
    std::vector<std::string_view> parts = split(clause, ':');
    if (parts.size() > 2)
      return bad(var, value, "more than one ':' in \"" + std::string(clause) + "\"");
    int coll = -1;  // -1: every collective
    std::string_view list = trim(parts.back());
    if (parts.size() == 2) {
      std::string_view prefix = trim(parts[0]);
      for (int i = 0; i < kColls; i++)
        if (sameName(prefix, kCollPrefixes[i])) coll = i;
      if (coll < 0)
        return bad(var, value, "unknown collective \"" + std::string(prefix) +
                                   "\" (Broadcast, Reduce, AllGather, ReduceScatter, AllReduce, AlltoAll)");
      if (list.empty())
        return bad(var, value, "empty list after \"" + std::string(prefix) + ":\"");
    } else if (!first) {
      // NCCL: a clause without a prefix after the first makes no sense.
      return bad(var, value,
                 "\"" + std::string(clause) + "\" needs a collective prefix (coll:list)");
    }
    first = false;
    bool exclude = !list.empty() && list.front() == '^';
    if (exclude) list.remove_prefix(1);
    uint32_t mask = 0;
    for (std::string_view item : split(list, ',')) {
      item = trim(item);
      if (item.empty()) continue;
      int idx = f.indexOf(item);
      if (idx < 0) {
        std::string known;
        for (const char* n : names) known += (known.empty() ? "" : ", ") + std::string(n);
        return bad(var, value, "unknown name \"" + std::string(item) + "\" (" + known + ")");
      }
      mask |= uint32_t(1) << idx;
    }
    uint32_t set = exclude ? f.all() & ~mask : mask;
    for (int i = 0; i < kColls; i++)
      if ((coll < 0 && i < kNcclColls) || coll == i) f.enabled_[i] = set;
  }
  return f;
}

bool CollFilter::allows(CollKind kind, std::string_view name) const {
  int c = collIndex(kind);
  if (c < 0) return true;
  if (names_.empty()) return true;  // default-constructed: no vocabulary, no restriction
  int idx = indexOf(name);
  return idx >= 0 && (enabled_[c] >> idx & 1);
}

bool CollFilter::unrestricted() const {
  for (uint32_t e : enabled_)
    if ((e & all()) != all()) return false;
  return true;
}

// Ferry's registry names first (registry order), then NCCL's others.
std::span<const char* const> algoNames() {
  static const std::vector<const char*> kNames = [] {
    std::vector<const char*> v;
    for (const Algorithm& a : algorithmRegistry()) v.push_back(a.name);
    for (const char* n : kNcclAlgoNames) {
      bool known = false;
      for (const char* have : v) known = known || sameName(n, have);
      if (!known) v.push_back(n);
    }
    return v;
  }();
  return kNames;
}
std::span<const char* const> protoNames() { return kProtoNames; }

Result<CollFilter> parseAlgoFilter(std::string_view value) {
  FERRY_ASSIGN(CollFilter f, CollFilter::parse(value, algoNames(), "NCCL_ALGO"));
  // One line naming every collective left with none of Ferry's algorithms.
  std::string lacking;
  for (CollKind k : kCollKinds) {
    bool ferryHas = false;
    for (const Algorithm& a : algorithmRegistry()) ferryHas = ferryHas || f.allows(k, a.name);
    if (!ferryHas) lacking += (lacking.empty() ? "" : ", ") + std::string(collName(k));
  }
  if (!lacking.empty())
    FERRY_INFO(log::kTuning, "NCCL_ALGO=\"%.*s\" allows no algorithm Ferry has for %s; "
               "those run the one Ferry picks",
               static_cast<int>(value.size()), value.data(), lacking.c_str());
  return f;
}

Result<CollFilter> parseProtoFilter(std::string_view value) {
  FERRY_ASSIGN(CollFilter f, CollFilter::parse(value, protoNames(), "NCCL_PROTO"));
  if (!f.unrestricted())
    FERRY_INFO(log::kTuning, "NCCL_PROTO=\"%.*s\": Ferry has one protocol on host memory, "
               "equivalent to Simple; LL and LL128 also run as Simple",
               static_cast<int>(value.size()), value.data());
  return f;
}

}  // namespace ferry
