// Merging discovery into a topology file, NCCL's "on top" semantics for
// NCCL_TOPO_FILE: the file is the base and wins every conflict; discovery
// only fills in what the file lacks.
//   - <cpu> is matched by numaid: missing attributes are filled in; a NUMA
//     node the file does not have is added.
//   - <pci> is matched by bus id anywhere in the file: missing attributes
//     (class, link speed...) are filled in and discovered children merged
//     into it. A device the file lacks is added under the matched parent
//     (its bridge, or its CPU); when the file has a device but not the bridge
//     discovery put it under, the bridge level is skipped.
//   - <gpu> fills missing attributes and adds links to targets not listed.
//   - <net> is added unless the file already has a net of that name; it goes
//     into the device's <nic>, created if needed.
#pragma once

#include "topology/xml.h"

namespace ferry::topo {

void mergeTopology(XmlElement& base, const XmlElement& found);

}  // namespace ferry::topo
