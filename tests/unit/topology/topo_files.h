// Locates the shared real-world topology files for tests.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace ferry::topo::testing {

inline std::string topoDir() { return FERRY_TOPO_DIR; }
inline bool haveTopoDir() { return std::filesystem::is_directory(topoDir()); }
inline std::string topoFile(const std::string& name) { return topoDir() + "/" + name; }
inline const char* kMalformed = "dell-xe8545-malformed.xml";

inline std::vector<std::string> allTopoFiles() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(topoDir()))
    if (e.path().extension() == ".xml") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ferry::topo::testing

#define FERRY_NEED_TOPO_DIR()                                                    \
  do {                                                                           \
    if (!::ferry::topo::testing::haveTopoDir())                                  \
      GTEST_SKIP() << "shared topology files not found at " FERRY_TOPO_DIR;      \
  } while (0)
