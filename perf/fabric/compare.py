#!/usr/bin/env python3
"""compare.py: Ferry's built-in Socket network against libfabric's tcp provider,
moving the same bytes between the same two endpoints, in one run.

    perf/fabric/compare.py [--build DIR] [--runs N] [--netns] [--fi PROV:EP ...]
                           [--ferry LABEL[:VAR=VAL,...] ...] [-- DRIVER ARGS]

Each run executes every variant once, in an order that alternates from run to
run (A B, B A, ...), so a load change hits both sides alike; the table gives
each variant's median GB/s per (mode, size) and the ratio of the first Ferry
variant to the first libfabric one; a second table gives, per Ferry variant,
the median of the per-round ratios to that libfabric variant and how many
rounds were below 0.9. DRIVER ARGS go to both drivers
(bw_common.h: -b/-e/-f sizes, --window, --bytes, --mode, --timeout);
the default sweep is 64 KiB..64 MiB x4, window 4, uni and bidir.

Loopback (default): each driver runs as `--fork` (server child, client parent,
127.0.0.1); Ferry's driver gets NCCL_SOCKET_IFNAME=lo. --netns: one
tests/cluster/ferry-cluster run of 2 hosts x 1 rank (needs root), in which
host 0 serves and host 1 is the client, every variant in turn.

--fi PROV:EP  a libfabric variant (default tcp:msg; e.g. sockets:msg, tcp:rdm)
--quiet-below F --quiet-wait S: before each driver run wait up to S seconds
              for the CPUs to be at most F busy (a shared machine); the table
              header reports how busy they were either way
--max-others C --retries N: a driver run during which the rest of the machine
              used more than C CPU cores (/proc/stat minus the drivers' own
              rusage) is redone, at most N times; the header reports the kept ones
--ferry SPEC  a Ferry variant: LABEL or LABEL:ITEM,ITEM with ITEM VAR=VAL (the
              environment of both roles) or --flag / --option=value (ferry_net_bw options), e.g.
              --ferry ferry --ferry nt1:NCCL_SOCKET_NTHREADS=1 --ferry all:--test-all;
              ITEM @PATH runs that ferry_net_bw binary instead of the build's (A/B of two
              builds in one script: --ferry new --ferry old:@/tmp/old/ferry_net_bw)
Exit status: non-zero when any run of a driver failed (its stderr is shown).
"""
import argparse
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import time

ROW = re.compile(r"^(?:\[h\d+\.r\d+\] )?(uni|bidir)\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s*$")
MARK = re.compile(r"^(?:\[h\d+\.r\d+\] )?@@ (\S+) (\d+)\s*$")


def fmt_size(n):
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d%s" % (n // div, unit)
    return str(n)


def cpu_busy(interval=0.5):
    """Fraction of all CPUs busy over `interval` seconds (/proc/stat), before a run."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v), idle
    t0, i0 = snap()
    time.sleep(interval)
    t1, i1 = snap()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def settle(opts, busy_log):
    """Waits (at most --quiet-wait s) until the machine is below --quiet-below busy."""
    deadline = time.time() + opts.quiet_wait
    while True:
        b = cpu_busy()
        if b <= opts.quiet_below or time.time() >= deadline:
            busy_log.append(b)
            return
        time.sleep(1)


def busy_seconds():
    """CPU seconds spent busy by the whole machine so far (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v) - idle) / os.sysconf("SC_CLK_TCK")


def ours_seconds():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_measured(cmd, env, timeout):
    """Runs one driver; returns (process, CPU cores the rest of the machine used meanwhile)."""
    b0, o0, t0 = busy_seconds(), ours_seconds(), time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    others = (busy_seconds() - b0) - (ours_seconds() - o0)
    return p, max(0.0, others) / max(1e-3, time.time() - t0)


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime unavailable"


class Variant:
    def __init__(self, label, kind, binary, args, env):
        self.label, self.kind, self.binary, self.args, self.env = label, kind, binary, args, env


def variants(opts, bindir):
    out = []
    for spec in opts.ferry or ["ferry"]:
        label, _, envs = spec.partition(":")
        env = {"NCCL_SOCKET_IFNAME": "lo"} if not opts.netns else {}
        args = []
        binary = os.path.join(bindir, "ferry_net_bw")
        for kv in filter(None, envs.split(",")):
            if kv.startswith("@"):
                binary = kv[1:]
                continue
            if kv.startswith("--"):
                args += kv.split("=", 1)  # --flag or --option=value
                continue
            k, _, v = kv.partition("=")
            env[k] = v
        out.append(Variant(label, "ferry", binary, args, env))
    for spec in opts.fi or ["tcp:msg"]:
        prov, _, ep = spec.partition(":")
        ep = ep or "msg"
        out.append(Variant("fi-%s-%s" % (prov, ep), "fi", os.path.join(bindir, "fi_bw"),
                           ["--prov", prov, "--ep", ep], {}))
    for v in out:
        if not os.access(v.binary, os.X_OK):
            sys.exit("compare.py: %s not built (fi_bw needs libfabric-dev)" % v.binary)
    return out


def parse_rows(text):
    return {(m.group(1), int(m.group(2))): float(m.group(5))
            for m in map(ROW.match, text.splitlines()) if m}


def order(vs, run):
    return vs if run % 2 == 0 else list(reversed(vs))


def loopback(opts, vs, extra, busy_log, others_log):
    results = {v.label: [] for v in vs}  # label -> [rows per run]
    port = opts.port
    for run in range(opts.runs):
        for v in order(vs, run):
            for attempt in range(opts.retries + 1):
                settle(opts, busy_log)
                cmd = [v.binary, "--fork", "--port", str(port)] + v.args + extra
                port += 4
                env = dict(os.environ, **v.env)
                p, others = run_measured(cmd, env, opts.run_timeout)
                if p.returncode != 0:
                    sys.stderr.write(p.stdout + p.stderr)
                    sys.exit("compare.py: %s failed (exit %d): %s" % (v.label, p.returncode, shlex.join(cmd)))
                if opts.verbose:
                    sys.stderr.write("run %d %s attempt %d others %.2f cores\n%s"
                                     % (run, v.label, attempt, others, p.stdout))
                if others <= opts.max_others:
                    break
            others_log.append(others)
            results[v.label].append(parse_rows(p.stdout))
    return results


def netns(opts, vs, extra, busy_log, others_log):
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    launcher = os.path.join(root, "tests", "cluster", "ferry-cluster")
    lines = ["set -e"]
    port = opts.port
    for run in range(opts.runs):
        for v in order(vs, run):
            envs = " ".join("%s=%s" % (k, shlex.quote(x)) for k, x in v.env.items())
            common = shlex.join(["--port", str(port)] + v.args + extra)
            port += 4
            lines.append('if [ "$RANK" = 0 ]; then env %s %s --server --bind "$MASTER_ADDR" %s; '
                         'else echo "@@ %s %d"; env %s %s --client "$MASTER_ADDR" %s; fi'
                         % (envs, shlex.quote(v.binary), common, v.label, run, envs,
                            shlex.quote(v.binary), common))
    settle(opts, busy_log)
    cmd = [launcher, "--hosts", "2", "--rails", "1", "--ranks-per-host", "1",
           "--timeout", str(opts.run_timeout * opts.runs * len(vs)), "--", "bash", "-c",
           "\n".join(lines)]
    p, others = run_measured(cmd, os.environ, None)
    others_log.append(others)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        sys.exit("compare.py: ferry-cluster run failed (exit %d)" % p.returncode)
    results = {v.label: [] for v in vs}
    cur = None
    for line in p.stdout.splitlines():
        m = MARK.match(line)
        if m:
            cur = {}
            results[m.group(1)].append(cur)
            continue
        r = ROW.match(line)
        if r and cur is not None and line.startswith("[h1."):
            cur[(r.group(1), int(r.group(2)))] = float(r.group(5))
    if opts.verbose:  # the loopback's per-run format, so one parser reads both
        for run in range(opts.runs):
            for v in vs:
                if run < len(results[v.label]):
                    sys.stderr.write("run %d %s attempt 0 (one ferry-cluster run)\n" % (run, v.label))
                    for (mode, size), gbps in sorted(results[v.label][run].items()):
                        sys.stderr.write("%s %d 0 0 %.3f\n" % (mode, size, gbps))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=None, help="build directory (default: <repo>/build)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--port", type=int, default=29640, help="first out-of-band port (each run +4)")
    ap.add_argument("--netns", action="store_true", help="2 namespace hosts (ferry-cluster) instead of loopback")
    ap.add_argument("--fi", action="append", help="libfabric variant PROV:EP (repeatable)")
    ap.add_argument("--ferry", action="append", help="Ferry variant LABEL[:VAR=VAL,...] (repeatable)")
    ap.add_argument("--run-timeout", type=int, default=120, help="seconds per driver run")
    ap.add_argument("--quiet-below", type=float, default=0.15,
                    help="before each driver run, wait until the CPUs are at most this busy (0..1)")
    ap.add_argument("--quiet-wait", type=float, default=0,
                    help="longest wait for --quiet-below, seconds (default 0: only measure)")
    ap.add_argument("--max-others", type=float, default=0.3,
                    help="redo a driver run during which the rest of the machine used more CPU cores than this")
    ap.add_argument("--retries", type=int, default=2, help="redos per driver run (--max-others)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every run's rows on stderr")
    ap.add_argument("extra", nargs="*", help="driver arguments (after --)")
    opts = ap.parse_args()
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    bindir = os.path.join(opts.build or os.path.join(root, "build"), "bin")
    vs = variants(opts, bindir)
    load_before = uptime()
    busy, others = [], []
    results = (netns if opts.netns else loopback)(opts, vs, opts.extra, busy, others)
    load_after = uptime()

    keys = []
    for runs in results.values():
        for rows in runs:
            keys += [k for k in rows if k not in keys]
    keys.sort(key=lambda k: (k[0] != "uni", k[1]))
    ferry = next(v.label for v in vs if v.kind == "ferry")
    fi = next(v.label for v in vs if v.kind == "fi")
    print("# %s, %d interleaved runs, medians of GB/s (bidir: both directions); driver args: %s"
          % ("2 netns hosts" if opts.netns else "loopback", opts.runs, " ".join(opts.extra) or "defaults"))
    print("# load before: %s" % load_before)
    print("# load after:  %s" % load_after)
    print("# CPU busy in the 0.5 s before each driver run (others' load): median %.0f%%, max %.0f%%"
          % (100 * statistics.median(busy), 100 * max(busy)))
    print("# CPU cores the rest of the machine used during the kept driver runs: median %.2f, max %.2f"
          % (statistics.median(others), max(others)))
    head = "%-6s %6s" % ("mode", "size") + "".join(" %14s" % v.label for v in vs) + " %12s" % (
        "%s/%s" % ("ferry", "fi") if len(vs) == 2 else "%s/%s" % (ferry, fi))
    print(head)
    for k in keys:
        med = {}
        for v in vs:
            vals = [rows[k] for rows in results[v.label] if k in rows]
            med[v.label] = statistics.median(vals) if vals else None
        cells = "".join(" %14s" % ("%.3f" % med[v.label] if med[v.label] is not None else "n/a") for v in vs)
        ratio = med[ferry] / med[fi] if med[ferry] and med[fi] else None
        print("%-6s %6s%s %12s" % (k[0], fmt_size(k[1]), cells, "%.2f" % ratio if ratio else "n/a"))
    print_round_ratios(vs, results, keys, fi)
    return 0


def print_round_ratios(vs, results, keys, fi):
    """Per Ferry variant: the median of the per-round ratios to `fi` and, in
    brackets, how many rounds were below 0.9 (a load change within a round
    hits both sides alike, so this is steadier than a ratio of medians)."""
    print("# per-round ratios to %s: median (rounds below 0.9)" % fi)
    ferries = [v for v in vs if v.kind == "ferry"]
    print("%-6s %6s" % ("mode", "size") + "".join(" %14s" % v.label for v in ferries))
    for k in keys:
        cells = ""
        for v in ferries:
            rs = [a[k] / b[k] for a, b in zip(results[v.label], results[fi])
                  if k in a and k in b and b[k] > 0]
            cells += " %14s" % ("%.2f (%d)" % (statistics.median(rs), sum(r < 0.9 for r in rs)) if rs else "n/a")
        print("%-6s %6s%s" % (k[0], fmt_size(k[1]), cells))


if __name__ == "__main__":
    sys.exit(main())
