#include "comm/plugin_tuner.h"

#include <string>

#include "comm/comm.h"
#include "core/log.h"
#include "plugins/tuner/coll_kind.h"
#include "plugins/tuner/tuner_plugin.h"

namespace ferry {
namespace {

namespace tp = tunerplugin;

class PluginTuner final : public ExternalTuner {
 public:
  explicit PluginTuner(std::unique_ptr<tp::Tuner> t) : tuner_(std::move(t)) {}

  Result<const Algorithm*> pick(const CollArgs& a, const std::vector<Candidate>& table) override {
    std::optional<ncclFunc_t> func = tp::toNcclFunc(a.kind);
    if (!func) return static_cast<const Algorithm*>(nullptr);
    tp::CostTable cost;
    const Candidate* slot[tp::kNumAlgorithms][tp::kNumProtocols] = {};
    for (auto& row : cost)
      for (float& c : row) c = tp::kIgnore;
    for (const Candidate& c : table) {
      if (!c.allowed) continue;
      const Candidate*& s = slot[c.algo->ncclAlgo][c.algo->ncclProto];
      if (!s || c.us < s->us) s = &c;
      cost[c.algo->ncclAlgo][c.algo->ncclProto] = static_cast<float>(s->us);
    }
    int channels = 0;
    FERRY_TRY(tuner_->adjust(*func, a.count * a.elemSize, 1, false, cost, &channels));
    int bestA = -1, bestP = -1;
    for (int i = 0; i < tp::kNumAlgorithms; ++i)
      for (int j = 0; j < tp::kNumProtocols; ++j)
        if (cost[i][j] >= 0 && (bestA < 0 || cost[i][j] < cost[bestA][bestP])) bestA = i, bestP = j;
    if (bestA < 0) return invalidUsage("the plugin marked every entry of the cost table as ignored");
    if (!slot[bestA][bestP])
      return invalidUsage("the plugin chose algorithm " + std::to_string(bestA) + " protocol " +
                          std::to_string(bestP) + ", which has no Ferry algorithm");
    return slot[bestA][bestP]->algo;
  }

 private:
  std::unique_ptr<tp::Tuner> tuner_;
};

}  // namespace

std::unique_ptr<ExternalTuner> openPluginTuner(uint64_t commHash, int nranks, int nHosts) {
  if (!tp::loadedTuner()) return nullptr;
  tp::TunerInit init;
  init.commId = commHash;
  init.nRanks = static_cast<size_t>(nranks);
  init.nNodes = static_cast<size_t>(nHosts);
  std::unique_ptr<tp::Tuner> t = tp::Tuner::open(init, nullptr);
  if (!t) return nullptr;
  FERRY_INFO(log::kTuning, "tuner plugin %s (v%d) sees Ferry's cost table", t->name().c_str(),
             t->version());
  return std::make_unique<PluginTuner>(std::move(t));
}

void Comm::openTuner() { tuner_ = openPluginTuner(ctx_.commHash, nranks_, view_.nHosts()); }

}  // namespace ferry
