// alltoallv_perf's traffic pattern: the matrix file parser, the generated
// pattern and per-rank plans (see perf_alltoallv.h). No NCCL calls here, so
// the fuzz target tests/fuzz/fuzz_alltoallv_matrix.cc links just this file.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tools/perf_tools/perf_alltoallv.h"

namespace ferry::perf {
namespace {

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
    if (!std::isfinite(v)) {
      // strtod takes "nan" and "inf"; converting NaN to size_t is undefined.
      *error = "invalid value at " + where(name, rows, rowCols) + " (not a finite number)";
      return false;
    }
    if (v < 0) {
      *error = "invalid value at " + where(name, rows, rowCols) + " (must be non-negative)";
      return false;
    }
    long double scaled = static_cast<long double>(v) * p->scale;
    if (!(scaled <= static_cast<long double>(SIZE_MAX / 2))) {  // also a NaN scale
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

}  // namespace ferry::perf
