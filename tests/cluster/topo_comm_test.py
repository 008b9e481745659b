#!/usr/bin/env python3
"""cluster_topo_comm: `ferry-topo --comm --json` as one rank per process under ferry-cluster
(RANK/WORLD_SIZE/NCCL_COMM_ID from the launcher). Rank 0's JSON must show every host with
its ranks, each rank's local rank, rail (local rank i sends on rail i) and NIC (r<i>, from the
launcher's topology file), one ring per rail, and ring c leaving every host from local rank c.
Exit 77 (skip) when the launcher skips."""
import argparse
import json
import subprocess
import sys


def fail(msg, out=""):
    print("FAIL: " + msg + ("\n" + out if out else ""), flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launcher", required=True)
    ap.add_argument("--topo", required=True)
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--rails", type=int, default=2)
    ap.add_argument("--ranks-per-host", type=int, default=3)
    a = ap.parse_args()
    cmd = [a.launcher, "--hosts", str(a.hosts), "--rails", str(a.rails), "--ranks-per-host",
           str(a.ranks_per_host), "--timeout", "50", "--", a.topo, "--comm", "--json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout, end="")
    if p.returncode == 77:
        sys.exit(77)
    if p.returncode != 0:
        fail("ferry-cluster exited %d" % p.returncode)
    lines = [l[len("[h0.r0] "):] for l in p.stdout.splitlines() if l.startswith("[h0.r0] {")]
    if len(lines) != 1:
        fail("expected one JSON line from rank 0, got %d" % len(lines))
    v = json.loads(lines[0])
    per, hosts = a.ranks_per_host, a.hosts
    want_hosts = [{"host": h, "ranks": list(range(h * per, (h + 1) * per))} for h in range(hosts)]
    if v["nranks"] != hosts * per or v["hosts"] != want_hosts:
        fail("hosts: %s" % v["hosts"])
    for r, x in enumerate(v["ranks"]):
        if (x["host"], x["localRank"], x["rail"]) != (r // per, r % per, (r % per) % a.rails):
            fail("rank %d: %s" % (r, x))
        # The launcher's topology file: GPU i pairs with NIC r<i>, local rank i uses rail i % R.
        if x["nic"] != "r%d" % ((r % per) % a.rails):
            fail("rank %d: NIC %s, want r%d" % (r, x["nic"], (r % per) % a.rails))
    cap = per if per % 2 == 0 else per - 1
    if v["nRails"] != a.rails or len(v["rings"]) != min(a.rails, cap):
        fail("%d rails, %d rings" % (v["nRails"], len(v["rings"])))
    for c, ring in enumerate(v["rings"]):
        for h in range(hosts):
            if ring[(h + 1) * per - 1] != h * per + c:
                fail("ring %d leaves host %d from rank %d" % (c, h, ring[(h + 1) * per - 1]))
    for k in ("levels", "reduceGBs", "oversubscription", "chunkBytes", "allLocal", "calibration"):
        if k not in v:
            fail("key %s missing" % k)
    print("OK: %d hosts x %d ranks, %d rails, %d rings" % (hosts, per, a.rails, len(v["rings"])))


if __name__ == "__main__":
    main()
