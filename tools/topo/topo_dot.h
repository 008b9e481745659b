// Graphviz output for ferry-topo.
#pragma once

#include <string>

#include "topology/graph.h"

namespace ferry::topo {

// The graph in DOT: the PCI tree as solid edges, NVLink/xGMI/C2C as bold
// edges labelled with their link count, CPUs as boxes, GPUs and NICs filled.
std::string toDot(const Graph& g);
// Writes DOT to dotFile and/or a PNG to pngFile (through `dot -Tpng`);
// returns the process exit code and explains failures on stderr.
int drawGraph(const Graph& g, const std::string& dotFile, const std::string& pngFile);

}  // namespace ferry::topo
