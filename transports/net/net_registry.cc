// Network candidates and selection (see net_registry.h).
#include "transports/net/net_registry.h"

#include <strings.h>

#include "core/config.h"
#include "core/log.h"
#include "plugins/net/net_plugins.h"
#include "transports/net/net_connection.h"
#include "transports/netsocket/socket_net.h"
#ifdef FERRY_HAVE_UCX
#include "transports/netucx/ucx_net.h"
#endif

namespace ferry::net {
namespace {

// Ferry's own networks, in preference order.
std::vector<const ncclNet_v11_t*> builtinNets() {
  std::vector<const ncclNet_v11_t*> list{socketNet()};
#ifdef FERRY_HAVE_UCX
  list.push_back(ucxNet());
#endif
  return list;
}

bool nameMatches(const ncclNet_v11_t* net, const std::string& wanted) {
  return wanted.empty() || (net->name && strcasecmp(net->name, wanted.c_str()) == 0);
}

}  // namespace

std::vector<NetCandidate> netCandidates() {
  std::vector<NetCandidate> list;
  for (const netplugin::ExternalNet& e : netplugin::externalNets())
    list.push_back({e.net, e.library + " (v" + std::to_string(e.version) + ")"});
  for (const ncclNet_v11_t* n : builtinNets()) list.push_back({n, "built-in", n == socketNet()});
  return list;
}

Status checkNetName() {
  std::string wanted = config::getString(config::Param::kNet);
  if (wanted.empty()) return Status::ok();
  std::string names;
  for (const NetCandidate& c : netCandidates()) {
    if (nameMatches(c.net, wanted)) return Status::ok();
    names += std::string(names.empty() ? "" : ", ") + (c.net->name ? c.net->name : "?");
  }
  return invalidUsage("NCCL_NET=" + wanted + " names no available network (have: " + names + ")");
}

Result<ActiveNet> openNet(uint64_t commId) {
  std::string wanted = config::getString(config::Param::kNet);
  for (const NetCandidate& c : netCandidates()) {
    if (!nameMatches(c.net, wanted)) continue;
    ActiveNet a{c.net, nullptr, 0, c.origin, c.notesReadiness};
    ncclNetCommConfig_v11_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    ncclResult_t r = c.net->init(&a.ctx, commId, &cfg, netplugin::pluginLogger(), nullptr);
    bool initOk = r == ncclSuccess;
    if (initOk) r = c.net->devices(&a.ndev);
    if (r == ncclSuccess && a.ndev > 0) {
      FERRY_INFO(log::kInit | log::kNet, "NET: using network %s (%s), %d device(s)", c.net->name,
                 c.origin.c_str(), a.ndev);
      return a;
    }
    FERRY_INFO(log::kInit | log::kNet, "NET: skipping network %s (%s): %s", c.net->name,
               c.origin.c_str(), r == ncclSuccess ? "no devices" : resultName(r));
    // finalize only undoes a successful init: a plugin whose init failed has
    // nothing to finalize (and says so: "Finalizing already finalized plugin").
    if (initOk && c.net->finalize) c.net->finalize(a.ctx);
  }
  return invalidUsage("Failed to initialize any NET plugin" +
                      (wanted.empty() ? std::string() : " named " + wanted + " (NCCL_NET)"));
}

}  // namespace ferry::net
