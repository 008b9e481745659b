#include "algorithms/tuner.h"

#include <atomic>
#include <cstdio>

#include "core/log.h"

namespace ferry {
namespace {

// Collective kinds whose fallback was logged (bit = CollKind), so a
// filter that excludes everything costs one INFO line, not one per call.
std::atomic<uint32_t> gFallbackLogged{0};

const Candidate* cheapest(const std::vector<Candidate>& table, bool allowedOnly) {
  const Candidate* best = nullptr;
  for (const Candidate& c : table)
    if ((c.allowed || !allowedOnly) && (!best || c.us < best->us)) best = &c;
  return best;
}

void applyExternal(const CollArgs& a, ExternalTuner* external, Choice* choice) {
  Result<const Algorithm*> p = external->pick(a, choice->table);
  if (!p.isOk()) {
    FERRY_WARN("tuner plugin failed for %s of %zu bytes (%s); using Ferry's choice %s",
               collName(a.kind), a.count * a.elemSize, p.status().message().c_str(),
               choice->algo->name);
    return;
  }
  if (!p.value()) return;
  for (const Candidate& c : choice->table) {
    if (c.algo != p.value()) continue;
    if (!c.allowed) break;
    choice->algo = c.algo;
    choice->predictedUs = c.us;
    choice->by = "tuner plugin";
    return;
  }
  FERRY_WARN("tuner plugin chose %s for %s, which Ferry cannot run here; using %s",
             p.value()->name, collName(a.kind), choice->algo->name);
}

// Bytes of the larger of a rank's two buffers.
double callBytes(const CollArgs& a) {
  double block = static_cast<double>(a.count) * a.elemSize;
  switch (a.kind) {
    case CollKind::kAllGather: case CollKind::kReduceScatter: case CollKind::kAllToAll:
    case CollKind::kGather: case CollKind::kScatter:
      return block * a.nranks;
    default:
      return block;
  }
}

}  // namespace

Result<Choice> chooseAlgorithm(const CollArgs& a, const CommView& v, const CollFilter& filter,
                               ExternalTuner* external) {
  Choice choice;
  // Every rank must choose the same algorithm, or they run different
  // schedules and hang: costs are evaluated for rank 0 on every rank, so a
  // cost formula that looks at the caller's own host cannot split the choice.
  // Nor may one look at what only some ranks know: whether a call is in
  // place is each rank's own choice (a rooted call's at the root alone),
  // so costs are those of an out-of-place call everywhere (symmetricCost's
  // Broadcast once looked, and ranks chose apart and hung).
  CollArgs canon = a;
  canon.rank = 0;
  canon.inPlace = false;
  CommView sized = v.atSize(callBytes(a));
  for (const Algorithm& alg : algorithmRegistry()) {
    if (!alg.supports(a, v)) continue;
    choice.table.push_back(Candidate{&alg, alg.cost(canon, sized), filter.allows(a.kind, alg.name)});
  }
  if (choice.table.empty()) return internalError(std::string("no algorithm supports ") + collName(a.kind));
  const Candidate* best = cheapest(choice.table, true);
  if (!best) {
    best = cheapest(choice.table, false);
    choice.by = "fallback";
    uint32_t bit = uint32_t(1) << static_cast<int>(a.kind);
    if (!(gFallbackLogged.fetch_or(bit) & bit))
      FERRY_INFO(log::kTuning, "NCCL_ALGO allows no algorithm Ferry can run for this %s; using %s",
                 collName(a.kind), best->algo->name);
  }
  choice.algo = best->algo;
  choice.predictedUs = best->us;
  if (external && choice.by != std::string("fallback")) applyExternal(a, external, &choice);
  return choice;
}

std::string costTableText(const Choice& c) {
  std::string s;
  char buf[96];
  for (const Candidate& e : c.table) {
    snprintf(buf, sizeof(buf), "%s%s%s %.1f us", s.empty() ? "" : ", ", e.allowed ? "" : "-",
             e.algo->name, e.us);
    s += buf;
  }
  return s;
}

Result<Schedule> selectSchedule(const CollArgs& a, const CommView& v, const CollFilter& filter,
                                ExternalTuner* external) {
  FERRY_ASSIGN(Choice c, chooseAlgorithm(a, v, filter, external));
  return c.algo->build(a, v);
}

}  // namespace ferry
