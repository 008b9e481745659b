// Fuzz target: an NCCL topology XML file (NCCL_TOPO_FILE), through what
// Ferry does with one: parse (topology/xml.cc), build and validate the graph
// (graph.cc), the system of nodes and links (system.cc), GPU rails and their
// paths (rails.cc, paths.cc), and writing it back (NCCL_TOPO_DUMP_FILE).
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "topology/graph.h"
#include "topology/rails.h"
#include "topology/system.h"
#include "topology/xml.h"

using namespace ferry;
using namespace ferry::topo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto doc = parseXml(text);
  if (!doc.isOk()) {
    FUZZ_CHECK(!doc.status().message().empty());
    return 0;
  }
  // What the writer produces parses again to the same document.
  std::string written = writeXml(*doc.value());
  auto again = parseXml(written);
  FUZZ_CHECK(again.isOk());
  FUZZ_CHECK(writeXml(*again.value()) == written);
  auto g = Graph::fromElement(*doc.value());
  if (!g.isOk()) return 0;
  (void)g.value().toXml();
  System sys = System::build(g.value());
  (void)sys.nodes().size();
  std::vector<Rail> rails = assignRails(g.value());
  (void)railsJson(rails);
  return 0;
}
