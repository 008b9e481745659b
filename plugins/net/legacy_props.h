// Converting the device properties a v6..v10 net plugin fills in to v11, and
// checking properties from any plugin before Ferry uses them. Pure functions
// (no plugin is called); tests/fuzz/fuzz_plugin_props.cc feeds them arbitrary
// bytes as the plugin's struct.
#pragma once

#include <nccl_net.h>

#include "core/status.h"

namespace ferry::netplugin {

// `old` points at the plugin's ncclNetProperties_v<version>_t (version 6..10)
// for device `dev`. Fields the old version lacks get the values NCCL assumes
// for it (see net_plugins.h). *out is written even when the result is an
// error (which checkNetProps explains).
Status convertLegacyProps(int version, const void* old, int dev, ncclNetProperties_v11_t* out);

// Properties Ferry cannot use safely: vProps.ndevs beyond NCCL_NET_MAX_DEVS_PER_NIC
// (its devs[] would be read past its end), a negative device in it, or a
// netDeviceType that is not an enumerator (the field is read as an int).
Status checkNetProps(const ncclNetProperties_v11_t& p);

}  // namespace ferry::netplugin
