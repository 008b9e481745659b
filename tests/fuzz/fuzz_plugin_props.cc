// Fuzz target: the device properties an external net plugin fills in
// (plugins/net/legacy_props.cc). The first byte picks the plugin's version
// (6..11), the next 260 bytes are its ncclNetProperties_v<version>_t as the
// plugin left it, except its name/pciPath pointers, which point at the
// NUL-terminated strings that follow (or are NULL): Ferry reads those strings.
#include <string>

#include "plugins/net/legacy_props.h"
#include "tests/fuzz/fuzz_util.h"

using namespace ferry;
using namespace ferry::netplugin;

namespace {
constexpr size_t kStructBytes = 260;  // more than any version's struct

template <class P>
void placeStrings(void* raw, const char* name, const char* pci) {
  static_assert(sizeof(P) <= kStructBytes);
  auto* p = static_cast<P*>(raw);
  p->name = const_cast<char*>(name);
  p->pciPath = const_cast<char*>(pci);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Bytes in(data, size);
  int version = 6 + in.take<uint8_t>() % 6;
  alignas(16) uint8_t raw[kStructBytes] = {};
  size_t n = in.size() < sizeof(raw) ? in.size() : sizeof(raw);
  std::memcpy(raw, in.data(), n);
  std::string rest(reinterpret_cast<const char*>(in.data() + n), in.size() - n);
  size_t cut = rest.find('\0');
  std::string name = rest.substr(0, cut);
  std::string pci = cut == std::string::npos ? "" : rest.substr(cut + 1);
  const char* namePtr = (raw[0] & 1) ? nullptr : name.c_str();
  const char* pciPtr = (raw[0] & 2) ? nullptr : pci.c_str();
  switch (version) {
    case 6: placeStrings<ncclNetProperties_v6_t>(raw, namePtr, pciPtr); break;
    case 7: placeStrings<ncclNetProperties_v7_t>(raw, namePtr, pciPtr); break;
    case 8: placeStrings<ncclNetProperties_v8_t>(raw, namePtr, pciPtr); break;
    case 9: placeStrings<ncclNetProperties_v9_t>(raw, namePtr, pciPtr); break;
    case 10: placeStrings<ncclNetProperties_v10_t>(raw, namePtr, pciPtr); break;
    default: placeStrings<ncclNetProperties_v11_t>(raw, namePtr, pciPtr); break;
  }
  int dev = raw[1] % 8;
  ncclNetProperties_v11_t props;
  Status st;
  if (version == 11) {
    std::memcpy(&props, raw, sizeof(props));
    st = checkNetProps(props);
  } else {
    st = convertLegacyProps(version, raw, dev, &props);
  }
  if (!st.isOk()) {
    FUZZ_CHECK(!st.message().empty());
    return 0;
  }
  // What Ferry reads from accepted properties (net_transport.cc report, logs).
  std::string shown = props.name ? props.name : "";
  if (props.pciPath) shown += props.pciPath;
  FUZZ_CHECK(props.vProps.ndevs >= 0 && props.vProps.ndevs <= NCCL_NET_MAX_DEVS_PER_NIC);
  long sum = 0;
  for (int i = 0; i < props.vProps.ndevs; ++i) sum += props.vProps.devs[i];
  FUZZ_CHECK(sum >= 0);
  if (version < 11) FUZZ_CHECK(props.maxP2pBytes > 0 && props.maxCollBytes > 0);
  return 0;
}
