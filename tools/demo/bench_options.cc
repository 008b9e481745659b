#include "tools/demo/bench_options.h"

#include "tools/demo/fork_launch.h"  // exit codes

#include <getopt.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace ferry::bench {

bool parseSize(const std::string& text, size_t* bytes) {
  if (text.empty() || text[0] == '-') return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || !std::isfinite(v) || v < 0) return false;
  double mult = 1;
  std::string suffix(end);
  if (suffix == "K" || suffix == "k") {
    mult = 1024.0;
  } else if (suffix == "M" || suffix == "m") {
    mult = 1024.0 * 1024;
  } else if (suffix == "G" || suffix == "g") {
    mult = 1024.0 * 1024 * 1024;
  } else if (!suffix.empty()) {
    return false;
  }
  double total = v * mult;
  if (total > 1e18) return false;
  *bytes = static_cast<size_t>(total);
  return true;
}

bool parseRegisterMode(const std::string& text, int* mode, std::string* error) {
  if (text == "0" || text == "1" || text == "2") {
    *mode = text[0] - '0';
    return true;
  }
  *error = "invalid value '" + text +
           "' for -R (0 none, 1 ncclCommRegister, 2 ncclCommWindowRegister)";
  return false;
}

namespace {

bool parseInt(const char* text, int64_t lo, int64_t hi, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

constexpr int kOptNranks = 1000;

const option kLongOptions[] = {
    {"nranks", required_argument, nullptr, kOptNranks},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"iters", required_argument, nullptr, 'n'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"check", required_argument, nullptr, 'c'},
    {"repeats", required_argument, nullptr, 'r'},
    {"timeout", required_argument, nullptr, 'T'},
    {"local_register", required_argument, nullptr, 'R'},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0},
};

// Applies one option; returns false with *error set when the value is bad.
bool applyOption(int c, const char* arg, Options* o, std::string* error) {
  int64_t v = 0;
  auto needInt = [&](int64_t lo, int64_t hi) {
    if (parseInt(arg, lo, hi, &v)) return true;
    *error = std::string("invalid value '") + arg + "' for -" + static_cast<char>(c);
    return false;
  };
  switch (c) {
    case kOptNranks:
    case 't':
      if (!parseInt(arg, 1, 1024, &v)) {
        *error = std::string("invalid rank count '") + arg + "' (1..1024)";
        return false;
      }
      o->nranks = static_cast<int>(v);
      return true;
    case 'b':
    case 'e': {
      size_t bytes = 0;
      if (!parseSize(arg, &bytes)) {
        *error = std::string("invalid size '") + arg + "' for -" + static_cast<char>(c);
        return false;
      }
      (c == 'b' ? o->minBytes : o->maxBytes) = bytes;
      return true;
    }
    case 'i':
      if (!parseSize(arg, &o->stepBytes) || o->stepBytes == 0) {
        *error = std::string("invalid step '") + arg + "' for -i";
        return false;
      }
      return true;
    case 'f':
      if (!needInt(0, 1 << 20)) return false;
      o->stepFactor = v;
      return true;
    case 'n':
      if (!needInt(1, 1 << 30)) return false;
      o->iters = static_cast<int>(v);
      return true;
    case 'w':
      if (!needInt(0, 1 << 30)) return false;
      o->warmup = static_cast<int>(v);
      return true;
    case 'c':
      if (!needInt(0, 1 << 20)) return false;
      o->check = static_cast<int>(v);
      return true;
    case 'r':
      if (!needInt(1, 1 << 20)) return false;
      o->repeats = static_cast<int>(v);
      return true;
    case 'T':
      if (!needInt(0, 1 << 24)) return false;
      o->timeoutSec = static_cast<int>(v);
      return true;
    case 'R':
      return parseRegisterMode(arg, &o->localRegister, error);
    case 'h': o->help = true; return true;
    default:
      *error = "unknown option (see -h)";
      return false;
  }
}

}  // namespace

bool parseOptions(int argc, char** argv, Options* opts, std::string* error) {
  optind = 1;  // getopt keeps global state; allow repeated parsing (tests)
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":t:b:e:f:i:n:w:c:r:T:R:h", kLongOptions, nullptr)) != -1) {
    if (c == ':') {
      *error = std::string("option ") + argv[optind - 1] + " needs a value";
      return false;
    }
    if (c == '?') {
      *error = std::string("unknown option ") + argv[optind - 1];
      return false;
    }
    if (!applyOption(c, optarg, opts, error)) return false;
  }
  if (optind < argc) {
    *error = std::string("unexpected argument '") + argv[optind] + "'";
    return false;
  }
  if (opts->minBytes > opts->maxBytes) {
    *error = "minbytes (-b) is larger than maxbytes (-e)";
    return false;
  }
  return true;
}

std::string usage(const char* prog, const Options& d) {
  std::ostringstream s;
  s << "usage: " << prog << " [options]\n"
    << "  --nranks N, -t N   ranks (default " << d.nranks << ")\n"
    << "  -b, --minbytes S   first size, suffixes K/M/G (default " << d.minBytes << ")\n"
    << "  -e, --maxbytes S   last size, inclusive (default " << d.maxBytes << ")\n"
    << "  -f, --stepfactor F multiply the size by F each step (default " << d.stepFactor << ")\n"
    << "  -i, --stepbytes S  add S each step when F <= 1 (default " << d.stepBytes << ")\n"
    << "  -n, --iters N      timed iterations per size (default " << d.iters << ")\n"
    << "  -w, --warmup_iters N  untimed iterations per size (default " << d.warmup << ")\n"
    << "  -c, --check N      checked iterations per size, 0 = off (default " << d.check << ")\n"
    << "  -r, --repeats N    timed repeats, roofline reports the median (default " << d.repeats
    << ")\n"
    << "  -T, --timeout S    watchdog deadline in seconds, 0 = none (default " << d.timeoutSec
    << ")\n"
    << "  -R, --local_register 0/1/2  Ferry demo only: buffers from ncclMemAlloc,\n"
    << "                     registered with ncclCommRegister (1) or as symmetric\n"
    << "                     windows, ncclCommWindowRegister (2) (default " << d.localRegister
    << ")\n"
    << "  -h, --help         this text\n";
  return s.str();
}

std::vector<size_t> sweepSizes(const Options& o, size_t eltSize) {
  std::vector<size_t> out;
  size_t size = o.minBytes;
  while (size <= o.maxBytes) {
    out.push_back(size / eltSize * eltSize);
    size_t next = o.stepFactor > 1 ? size * static_cast<size_t>(o.stepFactor) : size + o.stepBytes;
    // A zero start with a factor would never advance; stop after one row.
    if (next <= size) break;
    size = next;
  }
  return out;
}

int parseOrExit(int argc, char** argv, Options* opts) {
  std::string error;
  if (!parseOptions(argc, argv, opts, &error)) {
    std::fprintf(stderr, "%s: %s\n%s", argv[0], error.c_str(), usage(argv[0], Options()).c_str());
    return kExitUsage;
  }
  if (opts->help) {
    std::fputs(usage(argv[0], Options()).c_str(), stdout);
    return kExitOk;
  }
  return -1;
}

}  // namespace ferry::bench
