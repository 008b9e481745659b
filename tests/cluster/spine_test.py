#!/usr/bin/env python3
"""cluster_spine: ferry-cluster's spine (--spine, --spine-shape) on 2 hosts x 2 rails.

Host 1 runs a TCP sink; host 0 sends it BYTES per transfer from an explicitly bound source
address and reads, before and after each transfer, its own rail counters and the spine's
(FERRY_CLUSTER_SPINE, through `ip netns exec`). From inside host 0's namespace it checks:
- cross-rail (rail-0 address -> host 1's rail-1 address, and rail 1 -> rail 0): the transfer
  works, host 1 sees the bound source, the spine's ports on both rails carry the bytes, and
  host 0's NIC on the destination's rail does not (the packet left on its source's rail);
- same-rail (rail r -> rail r, both rails): the spine's counters (nearly) do not move;
- unbound source to host 1's rail-1 address: the kernel picks the source of the connected
  route (host 0's rail-1 address), so the spine stays out of it. Ferry's Socket network
  connects that way (docs/cluster.md, "The spine");
- the spine is shaped independently of the rails: tbf at SPINE_RATE on the spine's veths,
  RAIL_RATE on the hosts', and a cross-rail transfer takes at least what SPINE_RATE allows
  (a lower bound, so a loaded machine cannot fail it).
The driver then checks the launcher's --counters JSON (the "spine" entry) and that nothing
of the run is left. Exit 77 (skip) when the launcher skips (not root, no `ip netns`).
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
PORT = 5000
RAIL_RATE, SPINE_RATE = "400mbit", "20mbit"
RAIL_TC, SPINE_TC = "400Mbit", "20Mbit"     # how `tc qdisc show` prints them
SPINE_BITS = 20e6
BYTES = 1 << 20
BURST = 131072                 # ferry-cluster's tbf bucket at these rates (fabric.shape_burst)
SLACK = 16384                  # ARP and flooded frames may reach the spine: far below BYTES


def fail(msg):
    print("SPINE TEST FAIL: " + msg, flush=True)
    sys.exit(1)


# ---------------------------------------------------------------- inside the namespaces

def rail_addr(host, rail):
    """10.<base+rail>.0.<host+1>, base from the launcher's rail-0 addresses."""
    base = int(os.environ["FERRY_CLUSTER_ADDRS"].split(",")[0].split(".")[1])
    return "10.%d.0.%d" % (base + rail, host + 1)


def counters(netns=None):
    """{ifname: (tx_bytes, rx_bytes)} of r0, r1 here or in netns."""
    out = {}
    for dev in ("r0", "r1"):
        cmd = ["cat", "/sys/class/net/%s/statistics/tx_bytes" % dev,
               "/sys/class/net/%s/statistics/rx_bytes" % dev]
        p = subprocess.run((["ip", "netns", "exec", netns] if netns else []) + cmd,
                           stdout=subprocess.PIPE, text=True, check=True)
        tx, rx = p.stdout.split()
        out[dev] = (int(tx), int(rx))
    return out


def delta(after, before):
    return {d: (after[d][0] - before[d][0], after[d][1] - before[d][1]) for d in after}


def serve():
    """Host 1: counts each connection's bytes and answers '<count> <peer> <local>'; an
    empty connection ends the run."""
    s = socket.create_server(("0.0.0.0", PORT))
    s.settimeout(50)
    while True:
        c, peer = s.accept()
        n = 0
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            n += len(b)
        c.sendall(("%d %s %s\n" % (n, peer[0], c.getsockname()[0])).encode())
        c.close()
        if n == 0:
            return 0


def send(dst, src, nbytes):
    """Sends nbytes to dst (source address src, None: unbound); returns (server's reply
    fields, seconds from connect to the reply, which follows the last byte)."""
    deadline = time.monotonic() + 30       # host 1 may start late on a loaded machine
    while True:
        try:
            c = socket.create_connection((dst, PORT), source_address=(src, 0) if src else None)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    t0 = time.monotonic()
    c.sendall(bytes(nbytes))
    c.shutdown(socket.SHUT_WR)
    reply = b""
    while not reply.endswith(b"\n"):
        b = c.recv(256)
        if not b:
            break
        reply += b
    took = time.monotonic() - t0
    c.close()
    return reply.decode().split(), took


def transfer(spine, name, dst, src):
    """One measured transfer: returns (own rails' delta, spine's delta, seconds)."""
    h0, sp = counters(), counters(spine)
    fields, took = send(dst, src, BYTES)
    dh, ds = delta(counters(), h0), delta(counters(spine), sp)
    print("%s: %s -> %s: reply %s in %.3f s; host 0 (tx,rx) %s; spine (tx,rx) %s" %
          (name, src or "unbound", dst, fields, took, dh, ds), flush=True)
    if len(fields) != 3 or int(fields[0]) != BYTES:
        fail("%s: host 1 received %s, not %d bytes" % (name, fields, BYTES))
    if src and fields[1] != src:
        fail("%s: host 1 saw source %s, not the bound %s" % (name, fields[1], src))
    return dh, ds, took, fields


def spine_moved(ds):
    return sum(tx + rx for tx, rx in ds.values())


def check_qdiscs(spine):
    for ns, rate in ((spine, SPINE_TC), (None, RAIL_TC)):
        for dev in ("r0", "r1"):
            p = subprocess.run((["ip", "netns", "exec", ns] if ns else []) +
                               ["tc", "qdisc", "show", "dev", dev], stdout=subprocess.PIPE, text=True)
            if "tbf" not in p.stdout or "rate " + rate not in p.stdout:
                fail("%s %s: want tbf rate %s, got %r" % (ns or "host 0", dev, rate, p.stdout))


def client():
    try:
        return client_checks()
    finally:   # also after a failed check: host 1 must not wait for the launcher's timeout
        try:
            send(rail_addr(1, 0), None, 0)           # ends host 1's sink
        except OSError:
            pass


def client_checks():
    spine = os.environ.get("FERRY_CLUSTER_SPINE")
    if not spine:
        fail("no FERRY_CLUSTER_SPINE in a --spine run")
    check_qdiscs(spine)
    for r in (0, 1):     # same rail: the bridge switches it, the spine's port sees ~nothing
        _, ds, _, _ = transfer(spine, "same-rail %d" % r, rail_addr(1, r), rail_addr(0, r))
        if spine_moved(ds) > SLACK:
            fail("same-rail %d: the spine moved %d bytes" % (r, spine_moved(ds)))
    # Time bound: two tbfs at SPINE_RATE in a row (the root-side port towards the spine, the
    # spine's port out); only one bucket's worth passes at once (the first feeds the second
    # at the rate). 0.8: margin for tbf's accounting; headers only make it slower.
    min_s = (BYTES - BURST) * 8 / SPINE_BITS * 0.8
    for r, s in ((0, 1), (1, 0)):   # cross rail: leaves on rail r, crosses the spine
        dh, ds, took, _ = transfer(spine, "cross %d->%d" % (r, s), rail_addr(1, s), rail_addr(0, r))
        own, other, sp_in, sp_out = "r%d" % r, "r%d" % s, "r%d" % r, "r%d" % s
        if ds[sp_in][1] < BYTES or ds[sp_out][0] < BYTES:
            fail("cross %d->%d: the spine's %s received %d and %s sent %d bytes (< %d)" %
                 (r, s, sp_in, ds[sp_in][1], sp_out, ds[sp_out][0], BYTES))
        if dh[own][0] < BYTES or dh[other][0] > SLACK:
            fail("cross %d->%d: host 0 sent %d bytes on %s and %d on %s: not on its source's rail" %
                 (r, s, dh[own][0], own, dh[other][0], other))
        if took < min_s:
            fail("cross %d->%d: %.3f s < %.3f s, faster than the spine's %s" % (r, s, took, min_s, SPINE_RATE))
    # Unbound: the connected route picks the destination rail's address; no spine.
    dh, ds, _, fields = transfer(spine, "unbound", rail_addr(1, 1), None)
    if fields[1] != rail_addr(0, 1) or spine_moved(ds) > SLACK or dh["r1"][0] < BYTES:
        fail("unbound: source %s, spine moved %d bytes, host 0's r1 sent %d" %
             (fields[1], spine_moved(ds), dh["r1"][0]))
    print("PROBE OK", flush=True)
    return 0


def probe():
    return serve() if os.environ["FERRY_CLUSTER_HOST"] == "1" else client()


# ---------------------------------------------------------------- driver

def leftovers(pid):
    ns = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout
    found = [l.split()[0] for l in ns.splitlines() if l.startswith("fc%d-" % pid)]
    found += [l for l in os.listdir("/sys/class/net") if l.startswith("fc%d" % pid)]
    if os.path.exists("/run/ferry-cluster/%d.json" % pid):
        found.append("state file")
    return found


def check_json(doc):
    sp = doc.get("spine")
    if doc.get("spine_shape") != SPINE_RATE or not sp or len(sp["rails"]) != 2:
        fail("counters JSON: spine_shape %r, spine %r" % (doc.get("spine_shape"), sp))
    for r, port in enumerate(sp["rails"]):
        if port["ifname"] != "r%d" % r or not port["addr"].endswith(".0.254"):
            fail("counters JSON: spine port %r" % port)
        # Each cross transfer entered the spine on one rail and left on the other.
        if port["rx_bytes"] < BYTES or port["tx_bytes"] < BYTES:
            fail("counters JSON: spine rail %d moved rx %d / tx %d (< %d)" %
                 (r, port["rx_bytes"], port["tx_bytes"], BYTES))
    print("counters JSON: spine %s" % [(p["ifname"], p["addr"], p["tx_bytes"], p["rx_bytes"])
                                       for p in sp["rails"]], flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launcher")
    ap.add_argument("--probe", action="store_true", help="(inside the namespaces)")
    args = ap.parse_args()
    if args.probe:
        return probe()
    fd, path = tempfile.mkstemp(prefix="ferry-spine-", suffix=".json")
    os.close(fd)
    cmd = [args.launcher, "--hosts", "2", "--rails", "2", "--spine", "--shape", RAIL_RATE,
           "--spine-shape", SPINE_RATE, "--timeout", "50", "--counters", path, "--",
           sys.executable, os.path.abspath(__file__), "--probe"]
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = p.communicate()
    sys.stdout.write(out)
    if p.returncode == SKIP:
        return SKIP
    if p.returncode != 0 or "[h0.r0] PROBE OK" not in out:
        fail("launcher exit %d" % p.returncode)
    with open(path) as f:
        check_json(json.load(f))
    os.unlink(path)
    if leftovers(p.pid):
        fail("left after the run: %s" % leftovers(p.pid))
    print("SPINE TEST PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
