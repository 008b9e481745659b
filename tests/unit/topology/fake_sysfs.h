// Helpers that build a fake sysfs/procfs tree for discovery tests.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ferry::topo::testing {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ferry-topo-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void put(const std::string& file, const std::string& text) {
  fs::create_directories(fs::path(file).parent_path());
  std::ofstream(file) << text << "\n";
}

// A relative symlink, so the fake tree resolves inside its own root.
inline void link(const std::string& root, const std::string& at, const std::string& target) {
  fs::create_directories(fs::path(root + at).parent_path());
  fs::path parent = fs::canonical(fs::path(root + at).parent_path());  // "at" may sit under a linked directory
  fs::create_symlink(fs::weakly_canonical(root + target).lexically_relative(parent), root + at);
}

// A PCI function at `dir` (under /sys/devices) with its /sys/bus/pci link.
inline void pciDev(const std::string& root, const std::string& dir, const std::string& cls, const std::string& vendor,
                   const std::string& numa, const std::string& speed, const std::string& width) {
  std::string d = root + dir;
  put(d + "/class", cls);
  put(d + "/vendor", vendor);
  put(d + "/device", "0x0001");
  put(d + "/numa_node", numa);
  if (!speed.empty()) put(d + "/max_link_speed", speed);
  if (!width.empty()) put(d + "/max_link_width", width);
  link(root, "/sys/bus/pci/devices/" + fs::path(dir).filename().string(), dir);
}

}  // namespace ferry::topo::testing
