#!/usr/bin/env python3
"""ctest driver: a rank's home NIC comes from the host's rail table, not from its local rank.

2 hosts x 2 ranks x 2 rails; every rank gets a topology file in which GPU 0 sits with NIC r1
and GPU 1 with NIC r0 (the reverse of the launcher's own files), so local rank i must send
from device 1 - i. The ranks run cluster_colls' AllReduce and AlltoAll cases (exact) with
NCCL_DEBUG_SUBSYS=NET; each rank's `NET: Socket: home device D` line must name the device of
its GPU's NIC. Exit 77 (skip) when ferry-cluster skips.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77
LINK = 'link_speed="16.0 GT/s PCIe" link_width="16"'


def reversed_topology(rails):
    out = ['<system version="1">', '  <cpu numaid="0">']
    for r in range(rails):
        bus = 0x10 * (r + 1)
        out += ['    <pci busid="0000:%02x:00.0" class="0x060400" %s>' % (bus, LINK),
                '      <pci busid="0000:%02x:00.0" class="0x030200" %s>' % (bus + 1, LINK),
                '        <gpu dev="%d" sm="80" gdr="0"/>' % r,
                '      </pci>',
                '      <pci busid="0000:%02x:00.0" class="0x020000" %s>' % (bus + 2, LINK),
                '        <nic><net name="r%d" dev="%d" speed="10000" port="1" gdr="0"/></nic>'
                % (rails - 1 - r, r),
                '      </pci>',
                '    </pci>']
    return "\n".join(out + ['  </cpu>', '</system>']) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launcher", required=True)
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    rails = 2
    fd, path = tempfile.mkstemp(prefix="ferry-rails-", suffix=".xml")
    with os.fdopen(fd, "w") as f:
        f.write(reversed_topology(rails))
    os.chmod(path, 0o644)
    env = dict(os.environ, FERRY_CLUSTER_CASES="AllReduce,AlltoAll")
    cmd = [args.launcher, "--hosts", "2", "--rails", str(rails), "--ranks-per-host", "2", "--timeout", "60",
           "--", "env", "NCCL_TOPO_FILE=" + path, "FERRY_TOPO_FILE_ONLY=1", "NCCL_DEBUG=INFO",
           "NCCL_DEBUG_SUBSYS=NET", args.bin]
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    os.unlink(path)
    out = p.stdout
    if p.returncode == SKIP:
        return SKIP
    homes = {int(r): int(d) for r, d in re.findall(r"^\[h\d+\.r(\d+)\].*NET: Socket: home device (\d+)", out, re.M)}
    print("home devices by rank: %s" % homes, flush=True)
    if p.returncode != 0:
        print(out[-3000:])
        print("RAIL TABLE TEST FAIL: launcher exit %d" % p.returncode)
        return 1
    for r in range(4):
        want = rails - 1 - (r % 2)
        if homes.get(r) != want:
            print(out[-3000:])
            print("RAIL TABLE TEST FAIL: rank %d (local rank %d) has home device %s, its GPU's NIC is device %d"
                  % (r, r % 2, homes.get(r), want))
            return 1
    print("RAIL TABLE TEST OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
