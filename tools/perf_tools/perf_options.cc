#include "tools/perf_tools/perf_options.h"

#include <getopt.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "tools/demo/bench_options.h"

namespace ferry::perf {
namespace {

// ncclRedOp_t / ncclDataType_t order.
const char* const kOpNames[] = {"sum", "prod", "max", "min", "avg"};
const char* const kTypeNames[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                  "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
constexpr int kNumOps = 5;
constexpr int kNumTypes = 12;

bool parseInt(const char* text, int64_t lo, int64_t hi, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

int lookup(const char* const* names, int n, const std::string& s) {
  for (int i = 0; i < n; ++i) {
    if (s == names[i]) return i;
  }
  return -1;
}

constexpr int kOptNranks = 1000;
constexpr int kOptCorrupt = 1001;
constexpr int kOptCsv = 1002;
constexpr int kOptHang = 1003;
constexpr int kOptStore = 1004;
constexpr int kOptHostBuffers = 1005;
constexpr int kOptDeviceBuffers = 1006;

const option kLong[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"timeout", required_argument, nullptr, 'T'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"report_timestamps", required_argument, nullptr, 'S'},
    {"output_file", required_argument, nullptr, 'J'},
    {"average", required_argument, nullptr, 'a'},
    {"local_register", required_argument, nullptr, 'R'},
    {"cta_policy", required_argument, nullptr, 'x'},
    {"device_implementation", required_argument, nullptr, 'D'},
    {"device_cta_count", required_argument, nullptr, 'V'},
    {"memory", required_argument, nullptr, 'M'},
    {"unalign", required_argument, nullptr, 'u'},
    {"per_iter_timing", required_argument, nullptr, 'I'},
    {"per_iter_skip", required_argument, nullptr, 'K'},
    {"help", no_argument, nullptr, 'h'},
    {"nranks", required_argument, nullptr, kOptNranks},
    {"corrupt-for-test", no_argument, nullptr, kOptCorrupt},
    {"csv", required_argument, nullptr, kOptCsv},
    {"hang-for-test", no_argument, nullptr, kOptHang},
    {"store", required_argument, nullptr, kOptStore},
    {"host-buffers", no_argument, nullptr, kOptHostBuffers},
    {"device-buffers", no_argument, nullptr, kOptDeviceBuffers},
    {nullptr, 0, nullptr, 0},
};

struct Parser {
  PerfOptions* o;
  std::string* error;
  ParseResult result = ParseResult::kOk;

  bool bad(const std::string& msg, ParseResult r = ParseResult::kUsage) {
    *error = msg;
    result = r;
    return false;
  }
  // --store HOST:PORT; the last colon splits, so the host part stays free-form.
  bool parseStore(const char* arg) {
    std::string text(arg);
    size_t colon = text.rfind(':');
    int64_t port = 0;
    if (colon == std::string::npos || colon == 0 ||
        !parseInt(text.c_str() + colon + 1, 1, 65535, &port)) {
      return bad("invalid --store '" + text + "' (HOST:PORT, port 1..65535)");
    }
    o->storeHost = text.substr(0, colon);
    o->storePort = static_cast<int>(port);
    return true;
  }
  bool integer(int c, const char* arg, int64_t lo, int64_t hi, int64_t* v) {
    if (parseInt(arg, lo, hi, v)) return true;
    std::ostringstream s;
    s << "invalid value '" << arg << "' for -" << static_cast<char>(c) << " (" << lo << ".." << hi
      << ")";
    return bad(s.str());
  }
  // A GPU-only option: validated as an integer, then only noted when set.
  bool gpuOnly(int c, const char* arg, const char* what) {
    int64_t v = 0;
    if (!integer(c, arg, 0, 1 << 20, &v)) return false;
    if (v != 0) {
      o->notes.push_back(std::string("-") + static_cast<char>(c) + " " + arg + ": " + what +
                         "; Ferry runs on host memory, so it is ignored");
    }
    return true;
  }
  bool names(int c, const char* arg, const char* const* table, int n, std::vector<int>* out) {
    out->clear();
    if (std::string(arg) == "all") {
      for (int i = 0; i < n; ++i) out->push_back(i);
      return true;
    }
    int i = lookup(table, n, arg);
    if (i < 0) {
      std::string msg =
          std::string("invalid value '") + arg + "' for -" + static_cast<char>(c) + " (one of";
      for (int k = 0; k < n; ++k) msg += std::string(" ") + table[k];
      return bad(msg + " all)");
    }
    out->push_back(i);
    return true;
  }
  bool apply(int c, const char* arg);
};

bool Parser::apply(int c, const char* arg) {
  int64_t v = 0;
  switch (c) {
    case kOptNranks:
      if (!integer(c, arg, 1, 1024, &v))
        return bad(std::string("invalid --nranks '") + arg + "' (1..1024)");
      o->nranks = static_cast<int>(v);
      return true;
    case 't':
      if (!integer(c, arg, 1, 1024, &v)) return false;
      if (v != 1)
        return bad("-t " + std::string(arg) +
                       ": only 1 thread per process is supported; use --nranks N to run N ranks",
                   ParseResult::kNotImplemented);
      return true;
    case 'g':
      if (!integer(c, arg, 1, 1024, &v)) return false;
      if (v != 1)
        return bad(
            "-g " + std::string(arg) +
                ": host memory has no GPUs, only -g 1 is supported; use --nranks N to run N ranks",
            ParseResult::kNotImplemented);
      return true;
    case 'b':
    case 'e': {
      size_t bytes = 0;
      if (!bench::parseSize(arg, &bytes))
        return bad(std::string("invalid size '") + arg + "' for -" + static_cast<char>(c));
      (c == 'b' ? o->minBytes : o->maxBytes) = bytes;
      return true;
    }
    case 'i':
      if (!bench::parseSize(arg, &o->stepBytes) || o->stepBytes == 0)
        return bad(std::string("invalid step '") + arg + "' for -i");
      return true;
    case 'f':
      if (!integer(c, arg, 0, 1 << 20, &v)) return false;
      o->stepFactor = v;
      return true;
    case 'n':
      if (!integer(c, arg, 1, 1 << 30, &v)) return false;
      o->iters = static_cast<int>(v);
      return true;
    case 'm':
      if (!integer(c, arg, 1, 1024, &v)) return false;
      o->aggIters = static_cast<int>(v);
      return true;
    case 'w':
      if (!integer(c, arg, 0, 1 << 30, &v)) return false;
      o->warmup = static_cast<int>(v);
      return true;
    case 'N':
      if (!integer(c, arg, 0, 1 << 20, &v)) return false;
      if (v == 0)
        return bad("-N 0 (run forever) is not supported; give a cycle count",
                   ParseResult::kNotImplemented);
      o->runCycles = static_cast<int>(v);
      return true;
    case 'p':
      return integer(c, arg, 0, 1, &v);  // one init per process anyway
    case 'c':
      if (!integer(c, arg, 0, 1 << 20, &v)) return false;
      o->check = static_cast<int>(v);
      return true;
    case 'o':
      return names(c, arg, kOpNames, kNumOps, &o->ops);
    case 'd':
      return names(c, arg, kTypeNames, kNumTypes, &o->types);
    case 'r':
      if (!integer(c, arg, -1, 1023, &v)) return false;
      o->root = static_cast<int>(v);
      return true;
    case 'z':
      if (!integer(c, arg, 0, 3, &v)) return false;
      o->blocking = static_cast<int>(v);
      return true;
    case 'a':
      if (!integer(c, arg, 0, 3, &v)) return false;
      o->average = static_cast<int>(v);
      return true;
    case 'C':
      if (!integer(c, arg, 0, 1, &v)) return false;
      o->cpuTime = v != 0;
      return true;
    case 'T':
      if (!integer(c, arg, 0, 1 << 24, &v)) return false;
      o->timeoutSec = static_cast<int>(v);
      return true;
    case 'J':
      o->jsonFile = arg;
      return true;
    case 'y':
      return gpuOnly(c, arg, "the default CUDA stream");
    case 'G':
      if (!gpuOnly(c, arg, "CUDA graph capture")) return false;
      o->cudaGraph = std::string(arg) != "0";
      return true;
    case 'R': {
      std::string why;
      return bench::parseRegisterMode(arg, &o->localRegister, &why) || bad(why);
    }
    case 'x':
      return gpuOnly(c, arg, "the CTA policy");
    case 'D':
      return gpuOnly(c, arg, "device-API kernels");
    case 'V':
      return gpuOnly(c, arg, "the device kernel CTA count");
    case 'M':
      return gpuOnly(c, arg, "the GPU memory report");
    case 'S':
      if (!integer(c, arg, 0, 1, &v)) return false;
      o->timestamps = v != 0;
      return true;
    case 'u':
      if (!integer(c, arg, 0, 1024, &v)) return false;
      o->unalign = static_cast<int>(v);
      return true;
    case 'I':
      if (!integer(c, arg, 0, 1, &v)) return false;
      o->perIter = v != 0;
      return true;
    case 'K':
      if (!integer(c, arg, 0, 1 << 30, &v)) return false;
      o->perIterSkip = static_cast<int>(v);
      return true;
    case 'h':
      o->help = true;
      return true;
    case kOptCorrupt:
      o->corruptForTest = true;
      return true;
    case kOptHang:
      o->hangForTest = true;
      return true;
    case kOptCsv:
      if (*arg == '\0') return bad("--csv needs a file name");
      o->csvFile = arg;
      return true;
    case kOptStore:
      return parseStore(arg);
    case kOptHostBuffers:
      o->hostBuffers = true;
      return true;
    case kOptDeviceBuffers:
      o->deviceBuffers = true;
      return true;
    default:
      return bad("unknown option (see -h)");
  }
}

}  // namespace

const char* opName(int op) { return op >= 0 && op < kNumOps ? kOpNames[op] : "?"; }
const char* typeName(int type) { return type >= 0 && type < kNumTypes ? kTypeNames[type] : "?"; }

ParseResult parsePerfOptions(int argc, char** argv, PerfOptions* o, std::string* error) {
  optind = 1;  // getopt keeps global state; tests parse repeatedly
  opterr = 0;
  Parser p{o, error};
  const char* shortOpts = ":t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:R:x:D:V:J:S:M:u:I:K:h";
  int c;
  while ((c = getopt_long(argc, argv, shortOpts, kLong, nullptr)) != -1) {
    if (c == ':')
      return p.bad(std::string("option ") + argv[optind - 1] + " needs a value"), p.result;
    if (c == '?') return p.bad(std::string("unknown option ") + argv[optind - 1]), p.result;
    if (!p.apply(c, optarg)) return p.result;
  }
  if (optind < argc)
    return p.bad(std::string("unexpected argument '") + argv[optind] + "'"), p.result;
  if (o->minBytes > o->maxBytes)
    return p.bad("minbytes (-b) is larger than maxbytes (-e)"), p.result;
  // With 1 forked rank the count may still come from mpirun or the
  // environment, which perfMain checks once it knows.
  if (o->nranks > 1 && o->root >= o->nranks)
    return p.bad("root (-r) must be below the rank count (--nranks)"), p.result;
  // As nccl-tests: per-iteration timing cannot time a replayed CUDA graph.
  if (o->perIter && o->cudaGraph)
    return p.bad("-I (per-iteration timing) cannot be combined with -G (CUDA graphs)"), p.result;
  if (o->perIter && o->perIterSkip >= o->iters)
    return p.bad("-K " + std::to_string(o->perIterSkip) + " skips every one of the " +
                 std::to_string(o->iters) + " iterations (-n); nothing is left for -I"),
           p.result;
  if (o->ops.empty()) o->ops.push_back(0);
  if (o->types.empty()) o->types.push_back(7);
  return ParseResult::kOk;
}

std::vector<size_t> perfSizes(const PerfOptions& o) {
  std::vector<size_t> out;
  size_t size = o.minBytes;
  while (size <= o.maxBytes) {
    out.push_back(size);
    size_t next = o.stepFactor > 1 ? size * static_cast<size_t>(o.stepFactor) : size + o.stepBytes;
    if (next <= size) break;  // a zero start with a factor never advances
    size = next;
  }
  return out;
}

std::string perfUsage(const char* prog) {
  std::ostringstream s;
  s << "USAGE: " << prog << " (nccl-tests compatible; device buffers when a GPU is present)\n"
    << "  --nranks N            fork N ranks on this node (default 1)\n"
    << "  --store HOST:PORT     where rank 0 serves the id when RANK/WORLD_SIZE or\n"
    << "                        SLURM_PROCID/SLURM_NTASKS give the ranks (default\n"
    << "                        MASTER_ADDR:MASTER_PORT)\n"
    << "  -t,--nthreads 1       threads per process (only 1)\n"
    << "  -g,--ngpus 1          GPUs per thread (only 1: host memory)\n"
    << "  -b,--minbytes S       first size, K/M/G suffixes (default 32M)\n"
    << "  -e,--maxbytes S       last size (default 32M)\n"
    << "  -i,--stepbytes S      additive step when -f <= 1 (default 1M)\n"
    << "  -f,--stepfactor F     multiplicative step (default 1: off)\n"
    << "  -n,--iters N          timed iterations (default 20)\n"
    << "  -m,--agg_iters N      ops grouped per iteration (default 1)\n"
    << "  -w,--warmup_iters N   warmup iterations (default 1)\n"
    << "  -N,--run_cycles N     repeat the sweep N times (default 1)\n"
    << "  -p,--parallel_init 0/1  accepted, no effect\n"
    << "  -c,--check N          checked iterations, 0 = off (default 1)\n"
    << "  -o,--op <sum/prod/min/max/avg/all>  (default sum)\n"
    << "  -d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/\n"
    << "                 f8e4m3/f8e5m2/all>  (default float)\n"
    << "  -r,--root R           root of rooted ops, -1 = every root (default 0)\n"
    << "  -z,--blocking 0..3    barrier after each op when 1 (default 0)\n"
    << "  -a,--average 0..3     time over ranks: 0 rank 0, 1 mean, 2 min, 3 max (default 1)\n"
    << "  -C,--report_cputime 0/1  host enqueue time (equals completion time on host memory)\n"
    << "  -T,--timeout S        abort after S seconds, exit 4 (default 0: none)\n"
    << "  -J,--output_file F    JSON results when F ends in .json (nccl-tests format 3)\n"
    << "  --csv F               the rows as CSV in file F\n"
    << "  -u,--unalign N        shift buffers by N elements (default 0)\n"
    << "  -S,--report_timestamps 0/1  a timestamp column on each row\n"
    << "  -I,--per_iter_timing 0/1  time every iteration on the host: i_min i_max i_p99 i_cv%\n"
    << "  -K,--per_iter_skip K  leave the first K iterations out of the -I statistics\n"
    << "  --host-buffers        host memory even when a GPU is present (or FERRY_PERF_HOST=1)\n"
    << "  --device-buffers      device memory or fail: a GPU, else Ferry's FERRY_DEVICE\n"
    << "                        (set to testdev when unset: the stand-in device)\n"
    << "  -R,--local_register 0/1/2  buffers from ncclMemAlloc, registered with\n"
    << "                        ncclCommRegister (1) or as symmetric windows (2); with\n"
    << "                        device buffers ncclMemAlloc's device memory (default 0)\n"
    << "  -G -y -x -D -V -M     GPU-only: accepted, noted, ignored\n"
    << "  -h,--help\n";
  return s.str();
}

}  // namespace ferry::perf
