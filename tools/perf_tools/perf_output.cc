#include "tools/perf_tools/perf_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>

extern char** environ;

namespace ferry::perf {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

std::string num(double v) {
  if (std::isnan(v)) return "\"nan\"";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string halfJson(const bench::Half& h, bool cpuTime) {
  std::ostringstream s;
  s << "{" << quote(cpuTime ? "cpu_time" : "time") << ": " << num(h.timeUs)
    << ", \"alg_bw\": " << num(h.algbw) << ", \"bus_bw\": " << num(h.busbw)
    << ", \"nwrong\": " << (h.wrong < 0 ? std::string("null") : std::to_string(h.wrong)) << "}";
  return s.str();
}

std::string envJson() {
  std::string out = "{";
  bool first = true;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    if (kv.rfind("NCCL_", 0) != 0 && kv.rfind("FERRY_", 0) != 0) continue;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    out += (first ? "" : ", ") + quote(kv.substr(0, eq)) + ": " + quote(kv.substr(eq + 1));
    first = false;
  }
  return out + "}";
}

std::string configJson(const PerfOptions& o, const RunRecord& run) {
  std::ostringstream s;
  s << "{\"nthreads\": 1, \"ngpus\": 1, \"minimum_bytes\": " << o.minBytes
    << ", \"maximum_bytes\": " << o.maxBytes << ", ";
  if (o.stepFactor > 1) {
    s << "\"step_factor\": " << o.stepFactor;
  } else {
    s << "\"step_bytes\": " << o.stepBytes;
  }
  s << ", \"warmup_iters\": " << o.warmup << ", \"iterations\": " << o.iters
    << ", \"aggregated_iterations\": " << o.aggIters << ", \"validation\": " << o.check
    << ", \"graph\": 0, \"blocking_collectives\": " << o.blocking
    << ", \"per_iter_timing\": " << (o.perIter ? "\"true\"" : "\"false\"")
    << ", \"per_iter_skip\": " << o.perIterSkip << ", \"parallel_init\": 0, \"devices\": [";
  for (size_t r = 0; r < run.pids.size(); ++r) {
    s << (r ? ", " : "") << "{\"rank\": " << r << ", \"group\": 0, \"pid\": " << run.pids[r]
      << ", \"hostname\": " << quote(run.hostname)
      << ", \"device\": -1, \"device_hex\": \"\", \"device_info\": \"host memory\"}";
  }
  s << "]}";
  return s.str();
}

}  // namespace

std::string nowUtc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string toJson(const PerfOptions& o, const RunRecord& run) {
  std::ostringstream s;
  s << "{\n  \"version\": 3,\n  \"start_time\": " << quote(run.startTime) << ",\n  \"args\": [";
  for (size_t i = 0; i < run.args.size(); ++i) s << (i ? ", " : "") << quote(run.args[i]);
  s << "],\n  \"env\": " << envJson() << ",\n  \"nccl_version\": " << run.ncclVersion
    << ",\n  \"config\": " << configJson(o, run) << ",\n  \"results\": [";
  for (size_t i = 0; i < run.rows.size(); ++i) {
    const RowRecord& r = run.rows[i];
    char root[16];
    std::snprintf(root, sizeof root, "%6d", r.root);
    s << (i ? "," : "") << "\n    {\"size\": " << r.size << ", \"count\": " << r.count
      << ", \"type\": " << quote(r.type) << ", \"redop\": " << quote(r.redop)
      << ", \"root\": " << quote(root)
      << ", \"out_of_place\": " << halfJson(r.outOfPlace, o.cpuTime);
    if (r.outOfPlaceIter.present) s << ", \"out_of_place_per_iter\": " << iterJson(r.outOfPlaceIter);
    s << ", \"in_place\": " << halfJson(r.inPlace, o.cpuTime);
    if (r.inPlaceIter.present) s << ", \"in_place_per_iter\": " << iterJson(r.inPlaceIter);
    if (!r.timestamp.empty()) s << ", \"timestamp\": " << quote(r.timestamp);
    s
      << ", \"actual_iterations\": " << o.iters << ", \"experiment_name\": \"\"}";
  }
  s << "\n  ],\n  \"out_of_bounds\": {\"count\": " << run.outOfBounds
    << ", \"okay\": " << (run.outOfBounds == 0 ? "\"true\"" : "\"false\"") << "},\n"
    << "  \"average_bus_bandwidth\": {\"bandwidth\": " << num(run.avgBusBw)
    << ", \"okay\": \"unchecked\"},\n  \"errors\": [],\n  \"end_time\": " << quote(run.endTime)
    << "\n}\n";
  return s.str();
}

std::string toCsv(const RunRecord& run) {
  std::ostringstream s;
  // -I and -S add columns at the end, so the base columns never move.
  const bool iters = !run.rows.empty() && run.rows[0].outOfPlaceIter.present;
  const bool stamps = !run.rows.empty() && !run.rows[0].timestamp.empty();
  s << "size,count,type,redop,root,oop_time_us,oop_algbw_gbs,oop_busbw_gbs,oop_wrong,"
       "ip_time_us,ip_algbw_gbs,ip_busbw_gbs,ip_wrong";
  if (iters) {
    s << ",oop_i_min_us,oop_i_max_us,oop_i_p99_us,oop_i_cv_pct,"
         "ip_i_min_us,ip_i_max_us,ip_i_p99_us,ip_i_cv_pct";
  }
  s << (stamps ? ",timestamp\n" : "\n");
  auto half = [&s](const bench::Half& h) {
    s << "," << num(h.timeUs) << "," << num(h.algbw) << "," << num(h.busbw) << ",";
    if (h.wrong >= 0) s << h.wrong;  // empty when unchecked
  };
  auto iter = [&s](const IterReport& r) {
    s << "," << num(r.stats.minUs) << "," << num(r.stats.maxUs) << "," << num(r.stats.p99Us)
      << "," << num(r.stats.cvPct);
  };
  for (const RowRecord& r : run.rows) {
    s << r.size << "," << r.count << "," << r.type << "," << r.redop << "," << r.root;
    half(r.outOfPlace);
    half(r.inPlace);
    if (iters) {
      iter(r.outOfPlaceIter);
      iter(r.inPlaceIter);
    }
    if (stamps) s << "," << r.timestamp;
    s << "\n";
  }
  return s.str();
}

std::string writeExclusive(const std::string& path, const std::string& text) {
  std::string name = path;
  for (int k = -1; k < 1000; ++k) {
    if (k >= 0) name = path + "." + std::to_string(k);
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      std::fprintf(stderr, "cannot create %s: %s\n", name.c_str(), std::strerror(errno));
      return "";
    }
    size_t done = 0;
    while (done < text.size()) {
      ssize_t w = ::write(fd, text.data() + done, text.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        std::fprintf(stderr, "cannot write %s: %s\n", name.c_str(), std::strerror(errno));
        ::close(fd);
        return "";
      }
      done += static_cast<size_t>(w);
    }
    ::close(fd);
    return name;
  }
  std::fprintf(stderr, "cannot create %s: .0 to .999 exist too\n", path.c_str());
  return "";
}

}  // namespace ferry::perf
