"""fabric.py: the test fabric of ferry-cluster (see docs/cluster.md).

Network namespaces for the hosts, one veth per (host, rail) into one bridge per rail,
tbf shaping, the state file that lets --cleanup-stale remove a killed run's leftovers,
and the per-interface byte counters. ferry-cluster (the launcher) imports it; it runs
nothing but ip/tc/sysctl.
"""
import json
import os
import re
import signal
import subprocess
import sys

SKIP = 77
STATE_DIR = "/run/ferry-cluster"


def log(msg):
    print("ferry-cluster: " + msg, file=sys.stderr, flush=True)


def run(cmd, check=True):
    """Runs an ip/tc command; raises with its stderr when check and it fails."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return p


def skip(reason):
    print("SKIP: ferry-cluster: " + reason, flush=True)
    sys.exit(SKIP)


def check_environment():
    if os.geteuid() != 0:
        skip("needs root (network namespaces, veths, bridges)")
    try:
        p = run(["ip", "netns", "list"], check=False)
    except FileNotFoundError:
        skip("the `ip` command (iproute2) is not installed")
    if p.returncode != 0:
        skip("`ip netns list` does not work: " + p.stderr.strip())
    # Listing works in containers that cannot create anything: probe a namespace with a veth.
    probe = "fc%d-probe" % os.getpid()
    p = run(["ip", "netns", "add", probe], check=False)
    if p.returncode == 0:
        p = run(["ip", "-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1"], check=False)
        run(["ip", "netns", "del", probe], check=False)
    if p.returncode != 0:
        skip("cannot create a network namespace with a veth: " + p.stderr.strip())


# ---------------------------------------------------------------- naming / state

class Names:
    """All names of one run. Interface names stay <= 15 chars (IFNAMSIZ-1)."""

    def __init__(self, prefix, pid, hosts, rails):
        self.pid = pid
        self.prefix = prefix
        self.tag = "fc%d" % pid                    # <= 9 chars for pids < 2^22
        self.base = 16 + (pid % 59) * 4            # second octet of rail 0; base+3 <= 251
        self.hosts, self.rails = hosts, rails

    def netns(self, h):
        return "%s%d-h%d" % (self.prefix, self.pid, h)

    def hostid(self, h):
        return "%s%d-h%d" % (self.prefix, self.pid, h)

    def bridge(self, r):
        return "%sb%d" % (self.tag, r)

    def outer(self, h, r):
        return "%sh%dr%d" % (self.tag, h, r)

    @staticmethod
    def inner(r):
        return "r%d" % r

    def addr(self, h, r):
        return "10.%d.0.%d" % (self.base + r, h + 1)


def state_path(pid):
    return os.path.join(STATE_DIR, "%d.json" % pid)


def write_state(n):
    os.makedirs(STATE_DIR, exist_ok=True)
    st = {"pid": n.pid, "netns": [n.netns(h) for h in range(n.hosts)],
          "links": [n.bridge(r) for r in range(n.rails)] +
                   [n.outer(h, r) for h in range(n.hosts) for r in range(n.rails)]}
    with open(state_path(n.pid), "w") as f:
        json.dump(st, f)


def pid_is_ours(pid):
    """True when pid is a live ferry-cluster process (guards against pid reuse)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return b"ferry-cluster" in f.read()
    except OSError:
        return False


def remove_resources(netns, links):
    for ns in netns:
        pids = run(["ip", "netns", "pids", ns], check=False).stdout.split()
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        # Deleting the namespace destroys its veth ends and their root-side peers.
        run(["ip", "netns", "del", ns], check=False)
    for link in links:
        if os.path.exists("/sys/class/net/" + link):
            run(["ip", "link", "del", link], check=False)


def cleanup_stale():
    removed = 0
    if os.path.isdir(STATE_DIR):
        for fn in os.listdir(STATE_DIR):
            m = re.match(r"^(\d+)\.json$", fn)
            if not m or pid_is_ours(int(m.group(1))):
                continue
            try:
                with open(os.path.join(STATE_DIR, fn)) as f:
                    st = json.load(f)
                remove_resources(st.get("netns", []), st.get("links", []))
                removed += 1
            except (OSError, ValueError) as e:
                log("cannot read %s: %s" % (fn, e))
            os.unlink(os.path.join(STATE_DIR, fn))
    # Leftovers without a state file (default tag only): links fc<pid>... of dead pids.
    for link in os.listdir("/sys/class/net"):
        m = re.match(r"^fc(\d+)(b\d+|h\d+r\d+)$", link)
        if m and not pid_is_ours(int(m.group(1))):
            run(["ip", "link", "del", link], check=False)
            removed += 1
    for line in run(["ip", "netns", "list"], check=False).stdout.splitlines():
        ns = line.split()[0] if line.split() else ""
        m = re.match(r"^fc(\d+)-(h\d+|probe)$", ns)
        if m and not pid_is_ours(int(m.group(1))):
            remove_resources([ns], [])
            removed += 1
    log("cleanup-stale: removed %d stale item(s)" % removed)
    return 0


# ---------------------------------------------------------------- build / teardown

def rate_bits(rate):
    m = re.match(r"^(\d+(?:\.\d+)?)([kmg]?)(bit|bps)$", rate.lower())
    if not m:
        raise ValueError("bad --shape rate %r (e.g. 1gbit, 500mbit, 100mbps)" % rate)
    mult = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    return float(m.group(1)) * mult * (8 if m.group(3) == "bps" else 1)


def shape_burst(rate):
    # The bucket must hold a 64 KiB GSO packet and a millisecond at the rate (tbf's
    # watchdog is a high-resolution timer); a larger one lets every burst of up to
    # its size through at full speed, so mid-size messages would beat the rate.
    # (16 KiB made TCP crawl: 128 KiB messages at a third of the rate.)
    return max(int(rate_bits(rate) / 8 / 1000), 131072)


def shape(dev, rate, netns=None):
    burst = shape_burst(rate)
    cmd = ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
           "burst", str(burst), "latency", "100ms"]
    run((["ip", "netns", "exec", netns] if netns else []) + cmd)


def set_sysctl(path, value, netns=None):
    if netns:
        run(["ip", "netns", "exec", netns, "sysctl", "-q", "-w", "%s=%s" % (path, value)], check=False)
    else:
        try:
            with open("/proc/sys/" + path.replace(".", "/"), "w") as f:
                f.write(value)
        except OSError:
            pass


def warn_br_netfilter():
    try:
        with open("/proc/sys/net/bridge/bridge-nf-call-iptables") as f:
            on = f.read().strip() == "1"
    except OSError:
        return
    if not on:
        return
    try:
        policy = run(["iptables", "-S", "FORWARD"], check=False).stdout
    except FileNotFoundError:
        return
    if "-P FORWARD ACCEPT" not in policy:
        log("warning: br_netfilter is active and the FORWARD policy is not ACCEPT (Docker?): "
            "bridged rail traffic passes that chain and may be dropped")


def build(n, shape_rate, mtu):
    write_state(n)   # before creating anything: a crash mid-build is still cleanable
    warn_br_netfilter()
    for r in range(n.rails):
        br = n.bridge(r)
        run(["ip", "link", "add", br, "type", "bridge", "stp_state", "0", "forward_delay", "0"])
        set_sysctl("net.ipv6.conf.%s.disable_ipv6" % br, "1")
        run(["ip", "link", "set", br, "up"])
    for h in range(n.hosts):
        ns = n.netns(h)
        run(["ip", "netns", "add", ns])
        # No IPv6: no router solicitations or DAD chatter in the counters.
        set_sysctl("net.ipv6.conf.all.disable_ipv6", "1", ns)
        set_sysctl("net.ipv6.conf.default.disable_ipv6", "1", ns)
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        for r in range(n.rails):
            out, inner = n.outer(h, r), n.inner(r)
            run(["ip", "link", "add", out, "mtu", str(mtu), "type", "veth", "peer", "name", inner,
                 "mtu", str(mtu), "netns", ns])
            set_sysctl("net.ipv6.conf.%s.disable_ipv6" % out, "1")
            run(["ip", "link", "set", out, "master", n.bridge(r), "up"])
            run(["ip", "-n", ns, "addr", "add", n.addr(h, r) + "/24", "dev", inner])
            run(["ip", "-n", ns, "link", "set", inner, "up"])
            if shape_rate:
                shape(inner, shape_rate, ns)    # host -> switch
                shape(out, shape_rate)          # switch -> host


def teardown(n):
    remove_resources([n.netns(h) for h in range(n.hosts)],
                     [n.bridge(r) for r in range(n.rails)] +
                     [n.outer(h, r) for h in range(n.hosts) for r in range(n.rails)])
    try:
        os.unlink(state_path(n.pid))
    except OSError:
        pass


def read_counters(n):
    def stats(ns, dev):
        p = run(["ip", "netns", "exec", ns, "cat", "/sys/class/net/%s/statistics/tx_bytes" % dev,
                 "/sys/class/net/%s/statistics/rx_bytes" % dev], check=False)
        v = p.stdout.split()
        return {"tx_bytes": int(v[0]), "rx_bytes": int(v[1])} if len(v) == 2 else None

    hosts = []
    for h in range(n.hosts):
        ns = n.netns(h)
        rails = []
        for r in range(n.rails):
            d = {"rail": r, "ifname": n.inner(r), "addr": n.addr(h, r)}
            d.update(stats(ns, n.inner(r)) or {})
            rails.append(d)
        hosts.append({"host": h, "netns": ns, "rails": rails, "lo": stats(ns, "lo")})
    return {"hosts": hosts}
