#include "algorithms/comm_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "algorithms/ring_order.h"

namespace ferry {

const char* levelName(Level l) {
  switch (l) {
    case Level::kSelf: return "self";
    case Level::kIntraHost: return "intra-host";
    case Level::kInterHost: return "inter-host";
  }
  return "?";
}

CommView CommView::atSize(double bytes) const {
  CommView v = *this;
  // Ranks that share a core do not keep their data cached: every switch
  // between them (a rank yields its core whenever it waits) brings the
  // kernel's and the other rank's working sets through the cache. Measured
  // with 4 ranks on 2 cores: 32 and 128 KiB AllReduce ran at or below what
  // the uncached speeds predict (ring 78.6 us at 128 KiB, uncached 86.7,
  // cached 47.0), and with the cached figures Rabenseifner looked as cheap
  // as ring at 128 KiB and was chosen at 0.88x of ring.
  if (oversubscription > 1.0) return v;
  double workingSet = 2 * bytes;
  if (cachedCopyBytesPerUs <= 0 || workingSet > cacheBytes) return v;
  // A message between two ranks crosses cores: the receiver's copy misses
  // its own cache and is served from the other core's (about a quarter of
  // in-cache memcpy speed here, still faster than from memory).
  v.self.bytesPerUs = std::max(self.bytesPerUs, cachedCopyBytesPerUs);
  v.intra.bytesPerUs = std::max(intra.bytesPerUs, cachedCopyBytesPerUs / 4);
  v.reduceBytesPerUs = std::max(reduceBytesPerUs, cachedReduceBytesPerUs);
  return v;
}

bool CommView::uniformHosts() const {
  for (const auto& h : hostRanks)
    if (h.size() != hostRanks[0].size()) return false;
  return true;
}

CommView makeView(const std::vector<uint64_t>& hostOf, size_t chunkBytes, bool allLocal) {
  CommView v;
  v.nranks = static_cast<int>(hostOf.size());
  std::map<uint64_t, int> index;  // label -> host number, in order of first appearance
  for (int r = 0; r < v.nranks; ++r) {
    auto [it, fresh] = index.emplace(hostOf[r], static_cast<int>(index.size()));
    if (fresh) v.hostRanks.emplace_back();
    v.hostOf.push_back(it->second);
    v.localRankOf.push_back(static_cast<int>(v.hostRanks[it->second].size()));
    v.hostRanks[it->second].push_back(r);
  }
  v.railOf = v.localRankOf;
  v.nicOf.assign(v.nranks, "");
  v.nRails = 1;
  for (const auto& h : v.hostRanks) v.nRails = std::max(v.nRails, static_cast<int>(h.size()));
  v.chunkBytes = chunkBytes;
  v.allLocal = allLocal && v.hostRanks.size() == 1;
  setRings(&v, v.nRails);
  return v;
}

void setRings(CommView* v, int wanted) {
  v->rings = railRings(v->hostRanks, wanted);
  v->ringOrder = v->rings[0];
}

}  // namespace ferry

// ---- printing (ferryCommViewJson, ferry-topo --comm, logs)

namespace ferry {
namespace {

// A JSON number; non-finite values (an unknown speed) become null.
std::string num(double x) {
  if (!std::isfinite(x)) return "null";
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += static_cast<char>(c);
    else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

std::string intList(const std::vector<int>& xs, const char* sep, const char* open,
                    const char* close) {
  std::string o = open;
  for (size_t i = 0; i < xs.size(); ++i) o += (i ? sep : "") + std::to_string(xs[i]);
  return o + close;
}

std::string jsonList(const std::vector<int>& xs) { return intList(xs, ", ", "[", "]"); }

std::string linkJson(const LinkCost& l) {
  return "{\"latencyUs\": " + num(l.latencyUs) + ", \"bandwidthGBs\": " + num(l.bytesPerUs / 1000) +
         ", \"overheadUs\": " + num(l.overheadUs) + ", \"burstBytes\": " + num(l.burstBytes) +
         ", \"software\": " + (l.software ? "true" : "false") + "}";
}

}  // namespace

std::string viewJson(const CommView& v, const std::string& calibration) {
  std::string o = "{\"nranks\": " + std::to_string(v.nranks) + ", \"hosts\": [";
  for (int h = 0; h < v.nHosts(); ++h)
    o += std::string(h ? ", " : "") + "{\"host\": " + std::to_string(h) +
         ", \"ranks\": " + jsonList(v.hostRanks[h]) + "}";
  o += "], \"ranks\": [";
  for (int r = 0; r < v.nranks; ++r)
    o += std::string(r ? ", " : "") + "{\"rank\": " + std::to_string(r) +
         ", \"host\": " + std::to_string(v.hostOf[r]) +
         ", \"localRank\": " + std::to_string(v.localRankOf[r]) +
         ", \"rail\": " + std::to_string(v.railOf[r]) +
         ", \"nic\": " + quoted(r < static_cast<int>(v.nicOf.size()) ? v.nicOf[r] : "") + "}";
  o += "], \"nRails\": " + std::to_string(v.nRails);
  o += ", \"levels\": {\"self\": " + linkJson(v.self) + ", \"intra\": " + linkJson(v.intra) +
       ", \"inter\": " + linkJson(v.inter) + "}";
  o += ", \"reduceGBs\": " + num(v.reduceBytesPerUs / 1000) +
       ", \"oversubscription\": " + num(v.oversubscription);
  o += ", \"chunkBytes\": " + std::to_string(v.chunkBytes) +
       ", \"allLocal\": " + (v.allLocal ? "true" : "false");
  o += ", \"rings\": [";
  for (size_t c = 0; c < v.rings.size(); ++c) o += (c ? ", " : "") + jsonList(v.rings[c]);
  o += "]";
  if (!calibration.empty()) o += ", \"calibration\": " + quoted(calibration);
  return o + "}";
}

std::string viewTable(const CommView& v, const std::string& calibration) {
  char b[160];
  std::string o;
  std::snprintf(b, sizeof b,
                "%d ranks on %d host(s), %d rail(s), %zu ring(s), chunk %zu bytes, allLocal %s, "
                "oversubscription %.2f\n",
                v.nranks, v.nHosts(), v.nRails, v.rings.size(), v.chunkBytes,
                v.allLocal ? "yes" : "no", v.oversubscription);
  o += b;
  if (!calibration.empty()) o += "calibration: " + calibration + "\n";
  o += "level        latency(us)  bandwidth(GB/s)  overhead(us)  burst(bytes)  software\n";
  for (Level l : {Level::kSelf, Level::kIntraHost, Level::kInterHost}) {
    std::snprintf(b, sizeof b, "%-12s %11.3f  %15.3f  %12.3f  %12.0f  %8s\n", levelName(l), v.link(l).latencyUs,
                  v.link(l).bytesPerUs / 1000, v.link(l).overheadUs, v.link(l).burstBytes,
                  v.link(l).software ? "yes" : "no");
    o += b;
  }
  std::snprintf(b, sizeof b, "%-12s %11s  %15.3f\n", "reduce", "-", v.reduceBytesPerUs / 1000);
  o += b;
  o += "rank  host  local  rail  nic\n";
  for (int r = 0; r < v.nranks; ++r) {
    const char* nic = r < static_cast<int>(v.nicOf.size()) && !v.nicOf[r].empty() ? v.nicOf[r].c_str() : "-";
    std::snprintf(b, sizeof b, "%4d  %4d  %5d  %4d  %s\n", r, v.hostOf[r], v.localRankOf[r], v.railOf[r], nic);
    o += b;
  }
  for (int h = 0; h < v.nHosts(); ++h)
    o += "host " + std::to_string(h) + ": ranks " + intList(v.hostRanks[h], " ", "", "") + "\n";
  for (size_t c = 0; c < v.rings.size(); ++c)
    o += "ring " + std::to_string(c) + ": " + intList(v.rings[c], " -> ", "", "") + "\n";
  return o;
}

}  // namespace ferry
