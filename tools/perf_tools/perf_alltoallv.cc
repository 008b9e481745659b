#include "tools/perf_tools/perf_alltoallv.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tools/perf_tools/perf_data.h"

namespace ferry::perf {
namespace {

using AlltoallvFn = ncclResult_t (*)(const void*, const size_t*, const size_t*, void*,
                                     const size_t*, const size_t*, ncclDataType_t, ncclComm_t,
                                     cudaStream_t);

AlltoallvFn ferryFn() {
  static AlltoallvFn fn = reinterpret_cast<AlltoallvFn>(dlsym(RTLD_DEFAULT, "ferryAlltoAllv"));
  return fn;
}

// A number from the environment, kept when it parses completely (as
// nccl-tests: a malformed value leaves the default).
double envDouble(const char* name, double def) {
  const char* v = std::getenv(name);
  if (v == nullptr) return def;
  errno = 0;
  char* end = nullptr;
  double d = std::strtod(v, &end);
  return errno != ERANGE && end != v && *end == '\0' ? d : def;
}

std::string where(const std::string& name, size_t row, size_t col) {
  return "row " + std::to_string(row) + " col " + std::to_string(col) + " of alltoallv traffic matrix " + name;
}

}  // namespace

AlltoallvPattern& alltoallvPattern() {
  static AlltoallvPattern p;  // one per process: every rank of a run reads the same variables
  return p;
}

size_t AlltoallvPattern::peerBytes(int i, int j, int n, size_t totalBytes) const {
  if (matrixMode()) return matrix[static_cast<size_t>(i) * dim + j];
  if (n == 1) return totalBytes & ~size_t{15};
  const int distance = (j - i + n) % n;
  const double sumDistances = static_cast<double>(n) * (n - 1) / 2;
  const double uniform = static_cast<double>(totalBytes) / n;
  const double weighted = distance * static_cast<double>(totalBytes) / sumDistances;
  const double bytes = (1.0 - spread) * uniform + spread * weighted;
  return static_cast<size_t>(bytes) & ~size_t{15};
}

size_t AlltoallvPattern::paramCount(size_t bytes, size_t elt, int n) const {
  if (matrixMode()) return 0;
  return (bytes / elt / static_cast<size_t>(n)) & ~(16 / elt - 1);
}

void AlltoallvPattern::maxCounts(size_t param, size_t elt, int n, size_t* send,
                                 size_t* recv) const {
  const size_t total = param * static_cast<size_t>(n) * elt;
  *send = *recv = 0;
  for (int i = 0; i < n; ++i) {
    size_t s = 0, r = 0;
    for (int j = 0; j < n; ++j) {
      s += peerBytes(i, j, n, total) / elt;
      r += peerBytes(j, i, n, total) / elt;
    }
    *send = std::max(*send, s);
    *recv = std::max(*recv, r);
  }
}

bool parseAlltoallvMatrix(const std::string& text, const std::string& name, AlltoallvPattern* p,
                          std::string* error) {
  std::vector<size_t> values;
  size_t rows = 0, cols = 0, rowCols = 0;
  auto endRow = [&]() {
    if (rowCols == 0) return true;
    if (rows > 0 && rowCols != cols) {
      *error = "alltoallv traffic matrix " + name + ": row " + std::to_string(rows) + " has " +
               std::to_string(rowCols) + " values, expected " + std::to_string(cols);
      return false;
    }
    if (rows == 0) cols = rowCols;
    ++rows;
    rowCols = 0;
    return true;
  };
  const char* s = text.c_str();
  while (*s != '\0') {
    if (std::isspace(static_cast<unsigned char>(*s))) {
      if (*s++ == '\n' && !endRow()) return false;
      continue;
    }
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(s, &end);
    if (end == s || errno == ERANGE || (*end != '\0' && !std::isspace(static_cast<unsigned char>(*end)))) {
      *error = "invalid value at " + where(name, rows, rowCols) + " (not a number)";
      return false;
    }
    if (v < 0) {
      *error = "invalid value at " + where(name, rows, rowCols) + " (must be non-negative)";
      return false;
    }
    long double scaled = static_cast<long double>(v) * p->scale;
    if (scaled > static_cast<long double>(SIZE_MAX / 2)) {
      *error = "value at " + where(name, rows, rowCols) + " overflows after scaling";
      return false;
    }
    values.push_back(static_cast<size_t>(scaled) & ~size_t{15});
    ++rowCols;
    s = end;
  }
  if (!endRow()) return false;
  if (rows == 0) {
    *error = "alltoallv traffic matrix " + name + " is empty";
    return false;
  }
  if (rows != cols) {
    *error = "alltoallv traffic matrix " + name + " must be square (got " + std::to_string(rows) +
             "x" + std::to_string(cols) + ")";
    return false;
  }
  p->dim = static_cast<int>(rows);
  p->matrix = std::move(values);
  return true;
}

bool loadAlltoallvPattern(AlltoallvPattern* p, std::string* error) {
  p->spread = std::clamp(envDouble("NCCL_TESTS_ALLTOALLV_SPREAD", 1.0), 0.0, 1.0);
  p->scale = std::max(envDouble("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", 1.0), 0.0);
  const char* summary = std::getenv("NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY");
  p->printSummary = summary != nullptr && std::atoi(summary) != 0;
  const char* file = std::getenv("NCCL_TESTS_ALLTOALLV_MATRIX_FILE");
  p->file = file != nullptr ? file : "";
  if (!p->matrixMode()) return true;
  std::ifstream in(p->file, std::ios::binary);
  if (!in) {
    *error = "unable to open alltoallv traffic matrix file " + p->file + ": " + std::strerror(errno);
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  return parseAlltoallvMatrix(text.str(), p->file, p, error);
}

std::string alltoallvRunError(const AlltoallvPattern& p, size_t minBytes, size_t maxBytes,
                              int nranks) {
  if (!p.matrixMode()) return "";
  if (nranks > p.dim) {
    return "alltoallv traffic matrix " + p.file + " is " + std::to_string(p.dim) + "x" +
           std::to_string(p.dim) + ", smaller than the " + std::to_string(nranks) + " ranks";
  }
  if (minBytes != maxBytes) {
    return "-b and -e must be equal (e.g. -b 32M -e 32M) with an alltoallv traffic matrix";
  }
  size_t send = 0, recv = 0;
  p.maxCounts(0, 1, nranks, &send, &recv);
  if (maxBytes < std::max(send, recv)) {
    return "maxBytes (-e) must be at least " + std::to_string(std::max(send, recv)) +
           " bytes as required by traffic matrix file " + p.file + " (got " +
           std::to_string(maxBytes) + ")";
  }
  return "";
}

AlltoallvPlan alltoallvPlan(const AlltoallvPattern& p, size_t param, size_t elt, int n,
                            int rank) {
  const size_t total = param * static_cast<size_t>(n) * elt;
  AlltoallvPlan plan;
  for (int peer = 0; peer < n; ++peer) {
    size_t s = p.peerBytes(rank, peer, n, total) / elt;
    size_t r = p.peerBytes(peer, rank, n, total) / elt;
    plan.sendDispls.push_back(plan.sendTotal);
    plan.recvDispls.push_back(plan.recvTotal);
    plan.sendCounts.push_back(s);
    plan.recvCounts.push_back(r);
    plan.sendTotal += s;
    plan.recvTotal += r;
  }
  return plan;
}

bool haveFerryAlltoallv() { return ferryFn() != nullptr; }

ncclResult_t runAlltoallv(const void* send, void* recv, size_t param, int type, ncclComm_t comm,
                          int rank, int n, bool useExtension, cudaStream_t stream) {
  const size_t elt = typeSize(type);
  const auto dt = static_cast<ncclDataType_t>(type);
  AlltoallvPlan plan = alltoallvPlan(alltoallvPattern(), param, elt, n, rank);
  if (useExtension && ferryFn() != nullptr) {
    return ferryFn()(send, plan.sendCounts.data(), plan.sendDispls.data(), recv,
                     plan.recvCounts.data(), plan.recvDispls.data(), dt, comm, stream);
  }
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  const auto* sb = static_cast<const unsigned char*>(send);
  auto* rb = static_cast<unsigned char*>(recv);
  for (int peer = 0; peer < n && r == ncclSuccess; ++peer) {
    if (plan.sendCounts[peer] > 0)
      r = ncclSend(sb + plan.sendDispls[peer] * elt, plan.sendCounts[peer], dt, peer, comm, stream);
    if (r == ncclSuccess && plan.recvCounts[peer] > 0)
      r = ncclRecv(rb + plan.recvDispls[peer] * elt, plan.recvCounts[peer], dt, peer, comm, stream);
  }
  ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

int64_t alltoallvWrong(const AlltoallvPattern& p, const void* recv, size_t param, int type,
                       uint64_t seed, int n, int rank) {
  const size_t elt = typeSize(type);
  const size_t total = param * static_cast<size_t>(n) * elt;
  const auto* got = static_cast<const unsigned char*>(recv);
  unsigned char exp[8];
  int64_t wrong = 0;
  size_t at = 0;
  for (int src = 0; src < n; ++src) {
    // Where this rank's segment starts in src's send buffer.
    size_t srcOff = 0;
    for (int k = 0; k < rank; ++k) srcOff += p.peerBytes(src, k, n, total) / elt;
    const size_t cnt = p.peerBytes(src, rank, n, total) / elt;
    for (size_t i = 0; i < cnt; ++i, ++at) {
      encode(inputValue(seed, type, kOpNone, n, src, srcOff + i), type, exp);
      if (!matches(type, kOpNone, n, got + at * elt, exp, seed, at)) ++wrong;
    }
  }
  return wrong;
}

std::string alltoallvSummary(const AlltoallvPattern& p, size_t param, size_t elt, int n,
                             double seconds) {
  const size_t total = param * static_cast<size_t>(n) * elt;
  char buf[256];
  std::string out;
  if (p.matrixMode()) {
    std::snprintf(buf, sizeof buf,
                  "# NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: mode=matrix nranks=%d matrix_dim=%d "
                  "scale=%.3f time_usec=%.2f\n",
                  n, p.dim, p.scale, seconds * 1e6);
  } else {
    std::snprintf(buf, sizeof buf,
                  "# NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: mode=generated nranks=%d total_bytes=%zu "
                  "spread=%.3f time_usec=%.2f\n",
                  n, total, p.spread, seconds * 1e6);
  }
  out += buf;
  for (int r = 0; r < n; ++r) {
    size_t s = 0, v = 0;
    for (int peer = 0; peer < n; ++peer) {
      s += p.peerBytes(r, peer, n, total);
      v += p.peerBytes(peer, r, n, total);
    }
    double alg = seconds > 0 ? static_cast<double>(std::max(s, v)) / 1e9 / seconds : 0.0;
    std::snprintf(buf, sizeof buf, "#   rank=%d send_bytes=%zu recv_bytes=%zu alg_bw=%.2f bus_bw=%.2f\n",
                  r, s, v, alg, alg * (n - 1) / n);
    out += buf;
  }
  return out;
}

}  // namespace ferry::perf
