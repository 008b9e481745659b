#!/usr/bin/env python3
"""ctest driver: rail failover of the Socket network (FERRY_NET_RETRY_MS) on a multi-rail cluster.

cluster_colls runs its checked loop (FERRY_CLUSTER_LOOP_MS, AllReduce and AlltoAll of 4 MiB,
exact) on --hosts x --ranks-per-host over --rails rails while this script takes rail --rail
of host 1 down inside that host (`ip -n <host> link set r<rail> down`: its NIC, as a dead
port or cable would), once every rank printed `LOOP running`:

--mode down: the rail never returns. Every rank must finish the loop (exit 0, all results
  exact), a WARN must name the failed rail, and the counters must show the re-route: while the
  rail is down it carries (almost) nothing and the host's other rails carry its traffic.
--mode back: as down, then the rail comes back after --down-s seconds; a WARN must say a
  connection is back on the rail and the rail must carry traffic again before the loop ends.
--mode flap: down for 1 s, then up: every rank must finish without an error (TCP retransmits
  or the retry reconnects; the script reports which).

Byte counters are read from the hosts' rail interfaces (/sys/class/net) at the moments that
matter and printed per phase. Exit 77 (skip) when ferry-cluster skips.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from net_retry_test import SKIP, Launch, rank_logs, sh  # noqa: E402


def fail(msg):
    print("FAILOVER TEST FAIL: " + msg, flush=True)
    sys.exit(1)


def counters(launch, hosts, rails):
    """{(host, rail): tx + rx bytes} read inside each host namespace."""
    out = {}
    for h in range(hosts):
        for r in range(rails):
            total = 0
            for key in ("tx_bytes", "rx_bytes"):
                p = subprocess.run(["ip", "netns", "exec", launch.netns(h), "cat",
                                    "/sys/class/net/r%d/statistics/%s" % (r, key)],
                                   capture_output=True, text=True)
                total += int(p.stdout.strip() or 0)
            out[(h, r)] = total
    return out


def delta(a, b):
    return {k: b[k] - a[k] for k in a}


def show(name, d, hosts, rails, seconds):
    print("%-22s %s" % (name + " (MB/s)", "  ".join(
        "h%d.r%d %7.2f" % (h, r, d[(h, r)] / 1e6 / max(seconds, 1e-3))
        for h in range(hosts) for r in range(rails))), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launcher", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--mode", choices=["down", "back", "flap"], required=True)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--rails", type=int, default=2)
    ap.add_argument("--ranks-per-host", type=int, default=2)
    ap.add_argument("--rail", type=int, default=1)
    ap.add_argument("--loop-ms", type=int, default=30000)
    ap.add_argument("--down-s", type=float, default=12.0)
    ap.add_argument("--retry-ms", type=int, default=10000)
    ap.add_argument("--timeout", type=int, default=100)
    args = ap.parse_args()
    logdir = tempfile.mkdtemp(prefix="ferry-failover-")
    launch = Launch(args, logdir, hosts=args.hosts, rails=args.rails, per_host=args.ranks_per_host,
                    extra_env={"FERRY_CLUSTER_LOOP_ALLTOALL": "1", "NCCL_DEBUG": "WARN"})
    nranks = args.hosts * args.ranks_per_host
    if not launch.wait_for("LOOP running", nranks, args.timeout - 20):
        rc = launch.p.wait()
        if rc == SKIP:
            return SKIP
        fail("the ranks never started their loop (launcher exit %s)" % rc)
    H, R = args.hosts, args.rails
    time.sleep(2.0)
    c0, t0 = counters(launch, H, R), time.time()
    time.sleep(2.0)
    c1, t1 = counters(launch, H, R), time.time()
    ns, dev = launch.netns(1), "r%d" % args.rail
    if sh(["ip", "-n", ns, "link", "set", dev, "down"]).returncode != 0:
        fail("cannot set %s of host 1 down" % dev)
    down_s = 1.0 if args.mode == "flap" else args.down_s
    # The whole time the rail is down: failover takes a stall timeout per connection that
    # has data in flight (a quarter of the retry window) plus a reconnect, then the other
    # rails carry everything.
    c2, t2 = counters(launch, H, R), time.time()
    time.sleep(down_s)
    c3, t3 = counters(launch, H, R), time.time()
    c4 = t4 = None
    if args.mode != "down":
        sh(["ip", "-n", ns, "link", "set", dev, "up"])
        if args.mode == "back":
            time.sleep(5.0)
            c4, t4 = counters(launch, H, R), time.time()
    rc = launch.p.wait()
    out = "".join(launch.lines)
    logs = rank_logs(logdir)
    warns = [l.strip() for l in logs.splitlines() if "WARN" in l]
    print("%d WARN lines; the first ones:" % len(warns), flush=True)
    for l in warns[:10]:
        print("  " + l, flush=True)
    show("before", delta(c0, c1), H, R, t1 - t0)
    if args.mode != "flap":
        show("%s down (re-routed)" % dev, delta(c2, c3), H, R, t3 - t2)
    if c4:
        show("%s back" % dev, delta(c3, c4), H, R, t4 - t3)
    if rc != 0:
        fail("launcher exit %d (a rank failed; logs in %s)" % (rc, logdir))
    done = re.findall(r"^\[h\d+\.r\d+\] OK loop: \d+ AllReduce\+AlltoAll iterations$", out, re.M)
    if len(done) != nranks:
        fail("%d of %d ranks finished their loop" % (len(done), nranks))
    failed_over = [l for l in warns if "rail %s " % dev in l and "failed; the connection now runs" in l]
    if args.mode in ("down", "back"):
        if not failed_over:
            fail("no WARN names the failed rail %s (logs in %s)" % (dev, logdir))
        d = delta(c2, c3)
        on_rail = d[(1, args.rail)]
        others = sum(d[(1, r)] for r in range(R) if r != args.rail)
        print("re-routed phase: host 1 %s moved %d bytes, its other rails %d" % (dev, on_rail, others), flush=True)
        if on_rail > others / 100 or others < 4 << 20:
            fail("the counters do not show the re-route (host 1 %s: %d bytes, other rails: %d)"
                 % (dev, on_rail, others))
    if args.mode == "back":
        back = [l for l in warns if "is back on rail %s" % dev in l]
        moved = delta(c3, c4)[(1, args.rail)]
        print("after the rail came back: %d 'back on rail' WARNs, host 1 %s moved %d bytes"
              % (len(back), dev, moved), flush=True)
        if not back or moved < 1 << 20:
            fail("the connections did not return to %s" % dev)
    if args.mode == "flap":
        print("flap: %s" % ("the retry reconnected" if any(" broke (" in l for l in warns)
                            else "TCP rode it out (no break)"), flush=True)
    subprocess.run(["rm", "-rf", logdir])
    print("FAILOVER TEST OK (%s)" % args.mode, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
