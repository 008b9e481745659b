// Configuration registry (see config.h). The logger reads NCCL_DEBUG* through
// this file, so nothing here calls into the logger while mu_ is held: the
// "set by" INFO line and the bad-value WARN are emitted after unlocking.
#include "core/config.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>

#include "core/log.h"

namespace ferry::config {
namespace {

constexpr ParamDef kDefs[] = {
#define FERRY_PARAM(id, name, type, def, doc) {Param::id, name, Type::type, def, doc},
#include "core/params.def"
#undef FERRY_PARAM
};
constexpr int kNumParams = static_cast<int>(Param::kCount);
static_assert(sizeof(kDefs) / sizeof(kDefs[0]) == kNumParams);

struct Entry {
  bool loaded = false;
  bool set = false;
  std::string value;   // effective text (default when unset or invalid)
  std::string source;  // "environment", "config file <path>" or "default"
  int64_t i = 0;
  bool b = false;
};

struct FileValue {
  std::string value;
  std::string path;
};

// Never destroyed: detached threads (the bootstrap root) may read settings
// (e.g. through logging) while exit() runs static destructors (TSan: race
// with ~optional/~map at exit). std::mutex has no destructor to race.
std::mutex mu_;
Entry* const entries_ = new Entry[kNumParams];
std::optional<std::map<std::string, FileValue>>& fileValues_ =
    *new std::optional<std::map<std::string, FileValue>>;

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) b++;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) e--;
  return s.substr(b, e - b);
}

// Earlier files win, so read in priority order and keep the first value seen.
void parseFile(const std::string& path, std::map<std::string, FileValue>& out) {
  std::ifstream in(path);
  if (!in) return;
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = trim(line.substr(0, eq));
    std::string val = trim(line.substr(eq + 1));
    if (key.empty() || val.empty()) continue;
    out.emplace(key, FileValue{val, path});
  }
}

// Called with mu_ held. NCCL_CONF_FILE itself comes only from the
// environment: a config file cannot name another config file.
const std::map<std::string, FileValue>& fileValues() {
  if (!fileValues_) {
    fileValues_.emplace();
    const char* conf = std::getenv("NCCL_CONF_FILE");
    if (conf && *conf) {
      parseFile(conf, *fileValues_);
    } else {
      const char* home = std::getenv("HOME");
      if (home && *home) parseFile(std::string(home) + "/.nccl.conf", *fileValues_);
      parseFile("/etc/nccl.conf", *fileValues_);
    }
  }
  return *fileValues_;
}

std::optional<int64_t> parseInt(const std::string& s) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 0);
  if (errno != 0 || end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

bool iequals(const std::string& a, const char* b) {
  size_t n = 0;
  for (; b[n]; n++) {
    if (n >= a.size() || std::tolower(static_cast<unsigned char>(a[n])) != b[n]) return false;
  }
  return n == a.size();
}

std::optional<bool> parseBool(const std::string& s) {
  for (const char* t : {"1", "true", "yes", "on"})
    if (iequals(s, t)) return true;
  for (const char* t : {"0", "false", "no", "off"})
    if (iequals(s, t)) return false;
  return std::nullopt;
}

// Parse text into e; false if it does not parse (e then holds the default).
bool setTyped(const ParamDef& d, Entry& e, const std::string& text) {
  if (d.type == Type::kInt) {
    if (auto v = parseInt(text)) {
      e.i = *v;
      return true;
    }
    e.i = parseInt(d.def).value_or(0);
  } else if (d.type == Type::kBool) {
    if (auto v = parseBool(text)) {
      e.b = *v;
      return true;
    }
    e.b = parseBool(d.def).value_or(false);
  } else {
    return true;
  }
  e.value = d.def;
  return false;
}

struct Report {
  enum Kind { kNothing, kSet, kBad } kind = kNothing;
  std::string value, source;
};

// Fill e (mu_ held); say what to log once the lock is released.
Report load(const ParamDef& d, Entry& e) {
  Report r;
  std::string raw;
  const char* env = std::getenv(d.name);
  if (env && *env) {
    raw = env;
    e.source = "environment";
  } else {
    auto& fv = fileValues();
    auto it = fv.find(d.name);
    if (it != fv.end()) {
      raw = it->second.value;
      e.source = "config file " + it->second.path;
    }
  }
  e.loaded = true;
  e.set = !e.source.empty();
  if (!e.set) {
    e.source = "default";
    e.value = d.def;
    setTyped(d, e, e.value);
    return r;
  }
  e.value = raw;
  r.value = raw;
  r.source = e.source;
  r.kind = setTyped(d, e, raw) ? Report::kSet : Report::kBad;
  return r;
}

template <typename F>
auto withEntry(Param p, F f) {
  const ParamDef& d = def(p);
  Report r;
  std::unique_lock<std::mutex> lk(mu_);
  Entry& e = entries_[static_cast<int>(p)];
  if (!e.loaded) r = load(d, e);
  auto result = f(e);
  lk.unlock();
  if (r.kind == Report::kSet) {
    FERRY_INFO(log::kEnv, "%s set by %s to %s", d.name, r.source.c_str(), r.value.c_str());
  } else if (r.kind == Report::kBad) {
    FERRY_WARN("Invalid value '%s' for %s (set by %s), using default '%s'", r.value.c_str(),
               d.name, r.source.c_str(), d.def);
  }
  return result;
}

}  // namespace

std::span<const ParamDef> all() { return {kDefs, static_cast<size_t>(kNumParams)}; }

const ParamDef& def(Param p) { return kDefs[static_cast<int>(p)]; }

int64_t getInt(Param p) {
  return withEntry(p, [](const Entry& e) { return e.i; });
}

bool getBool(Param p) {
  return withEntry(p, [](const Entry& e) { return e.b; });
}

std::string getString(Param p) {
  return withEntry(p, [](const Entry& e) { return e.value; });
}

bool isSet(Param p) {
  return withEntry(p, [](const Entry& e) { return e.set; });
}

std::string source(Param p) {
  return withEntry(p, [](const Entry& e) { return e.source; });
}

void reload() {
  std::lock_guard<std::mutex> lk(mu_);
  for (int i = 0; i < kNumParams; ++i) entries_[i] = Entry{};
  fileValues_.reset();
}

}  // namespace ferry::config
