"""fabric.py: the test fabric of ferry-cluster (see docs/cluster.md).

Network namespaces for the hosts, one veth per (host, rail) into one bridge per rail,
optionally a spine (a router namespace with a port on every rail, and source-based
policy routing in the hosts so that cross-rail traffic goes through it), tbf shaping of
the rails and of the spine, the state file that lets --cleanup-stale remove a killed
run's leftovers (and its directory of topology files), and the per-interface byte counters.
ferry-cluster (the launcher) imports it; it runs nothing but ip/tc/sysctl.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys

SKIP = 77
STATE_DIR = "/run/ferry-cluster"
SPINE_HOST = 254         # the spine's last octet on every rail subnet (hosts use 1..MAX_HOSTS)
RAIL_TABLE = 100         # a host's routing table (and rule preference) for rail r: 100+r


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

    def __init__(self, prefix, pid, hosts, rails, spine=False):
        self.pid = pid
        self.prefix = prefix
        self.tag = "fc%d" % pid                    # <= 9 chars for pids < 2^22
        self.base = 16 + (pid % 59) * 4            # second octet of rail 0; base+3 <= 251
        self.hosts, self.rails, self.spine = hosts, rails, spine

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

    def subnet(self, r):
        return "10.%d.0.0/24" % (self.base + r)

    def spine_netns(self):
        return "%s%d-spine" % (self.prefix, self.pid)

    def spine_outer(self, r):
        """The spine's port on rail r's bridge (its peer inside the spine is r<r>)."""
        return "%ss%d" % (self.tag, r)

    def spine_addr(self, r):
        return "10.%d.0.%d" % (self.base + r, SPINE_HOST)

    def all_netns(self):
        return ([self.netns(h) for h in range(self.hosts)] +
                ([self.spine_netns()] if self.spine else []))

    def all_links(self):
        """Root-namespace links: what deleting the namespaces does not remove (bridges) and,
        should a namespace deletion fail, the root-side veth ends."""
        return ([self.bridge(r) for r in range(self.rails)] +
                [self.outer(h, r) for h in range(self.hosts) for r in range(self.rails)] +
                ([self.spine_outer(r) for r in range(self.rails)] if self.spine else []))


def state_path(pid):
    return os.path.join(STATE_DIR, "%d.json" % pid)


def topo_dir(pid):
    """The run's directory of per-host topology files (ferry-cluster writes them)."""
    return os.path.join(STATE_DIR, "%d.topo" % pid)


def write_state(n):
    os.makedirs(STATE_DIR, exist_ok=True)
    st = {"pid": n.pid, "netns": n.all_netns(), "links": n.all_links()}
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
            m = re.match(r"^(\d+)\.topo$", fn)
            if m and not pid_is_ours(int(m.group(1))):
                shutil.rmtree(os.path.join(STATE_DIR, fn), ignore_errors=True)
                removed += 1
                continue
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
        m = re.match(r"^fc(\d+)(b\d+|h\d+r\d+|s\d+)$", link)
        if m and not pid_is_ours(int(m.group(1))):
            run(["ip", "link", "del", link], check=False)
            removed += 1
    for line in run(["ip", "netns", "list"], check=False).stdout.splitlines():
        ns = line.split()[0] if line.split() else ""
        m = re.match(r"^fc(\d+)-(h\d+|spine|probe)$", ns)
        if m and not pid_is_ours(int(m.group(1))):
            remove_resources([ns], [])
            removed += 1
    log("cleanup-stale: removed %d stale item(s)" % removed)
    return 0


# ---------------------------------------------------------------- build / teardown

def rate_bits(rate):
    m = re.match(r"^(\d+(?:\.\d+)?)([kmg]?)(bit|bps)$", rate.lower())
    if not m:
        raise ValueError("bad rate %r (e.g. 1gbit, 500mbit, 100mbps)" % rate)
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


def add_bridge(n, r):
    br = n.bridge(r)
    run(["ip", "link", "add", br, "type", "bridge", "stp_state", "0", "forward_delay", "0"])
    set_sysctl("net.ipv6.conf.%s.disable_ipv6" % br, "1")
    run(["ip", "link", "set", br, "up"])


def add_netns(ns):
    run(["ip", "netns", "add", ns])
    # No IPv6: no router solicitations or DAD chatter in the counters.
    set_sysctl("net.ipv6.conf.all.disable_ipv6", "1", ns)
    set_sysctl("net.ipv6.conf.default.disable_ipv6", "1", ns)
    run(["ip", "-n", ns, "link", "set", "lo", "up"])


def add_port(ns, out, inner, bridge, addr, mtu, rate):
    """A veth from namespace ns (name inner, address addr/24) to a port `out` on bridge,
    with a tbf of `rate` on both ends (inner: towards the switch; out: from it)."""
    run(["ip", "link", "add", out, "mtu", str(mtu), "type", "veth", "peer", "name", inner,
         "mtu", str(mtu), "netns", ns])
    set_sysctl("net.ipv6.conf.%s.disable_ipv6" % out, "1")
    run(["ip", "link", "set", out, "master", bridge, "up"])
    run(["ip", "-n", ns, "addr", "add", addr + "/24", "dev", inner])
    run(["ip", "-n", ns, "link", "set", inner, "up"])
    if rate:
        shape(inner, rate, ns)
        shape(out, rate)


def add_spine(n, rate, mtu):
    """The router between the rails: one port on every rail's bridge at .254, forwarding on.
    The spine's ports have the rails' MTU: a bridge forwards no frame larger than the MTU of
    the port it leaves by."""
    ns = n.spine_netns()
    add_netns(ns)
    set_sysctl("net.ipv4.ip_forward", "1", ns)
    for r in range(n.rails):
        add_port(ns, n.spine_outer(r), n.inner(r), n.bridge(r), n.spine_addr(r), mtu, rate)


def route_via_spine(n, h):
    """Source-based policy routing in host h: a packet from its rail-r address leaves on
    rail r even towards another rail's subnet (through the spine), as a real NIC reaches
    only its own rail's switch. Without it the host's connected route to rail s would
    carry the packet on its own rail-s NIC and the spine would never see it. A socket
    without a bound source gets the connected route's (the destination rail's) address
    and so stays on the destination's rail (docs/cluster.md)."""
    ns = n.netns(h)
    for r in range(n.rails):
        table = str(RAIL_TABLE + r)
        run(["ip", "-n", ns, "route", "add", n.subnet(r), "dev", n.inner(r), "src", n.addr(h, r),
             "table", table])
        for s in range(n.rails):
            if s != r:
                run(["ip", "-n", ns, "route", "add", n.subnet(s), "via", n.spine_addr(r),
                     "dev", n.inner(r), "table", table])
        run(["ip", "-n", ns, "rule", "add", "pref", table, "from", n.addr(h, r), "table", table])


def build(n, shape_rate, mtu, spine_rate=None):
    write_state(n)   # before creating anything: a crash mid-build is still cleanable
    warn_br_netfilter()
    for r in range(n.rails):
        add_bridge(n, r)
    for h in range(n.hosts):
        add_netns(n.netns(h))
        for r in range(n.rails):
            add_port(n.netns(h), n.outer(h, r), n.inner(r), n.bridge(r), n.addr(h, r), mtu, shape_rate)
    if n.spine:
        add_spine(n, spine_rate, mtu)
        for h in range(n.hosts):
            route_via_spine(n, h)


def teardown(n):
    remove_resources(n.all_netns(), n.all_links())
    shutil.rmtree(topo_dir(n.pid), ignore_errors=True)
    try:
        os.unlink(state_path(n.pid))
    except OSError:
        pass


def if_stats(ns, dev):
    p = run(["ip", "netns", "exec", ns, "cat", "/sys/class/net/%s/statistics/tx_bytes" % dev,
             "/sys/class/net/%s/statistics/rx_bytes" % dev], check=False)
    v = p.stdout.split()
    return {"tx_bytes": int(v[0]), "rx_bytes": int(v[1])} if len(v) == 2 else None


def rail_ports(ns, addrs):
    """Counters of a namespace's rail veths r0..; addrs[r] is its address on rail r."""
    ports = []
    for r, addr in enumerate(addrs):
        d = {"rail": r, "ifname": Names.inner(r), "addr": addr}
        d.update(if_stats(ns, Names.inner(r)) or {})
        ports.append(d)
    return ports


def read_counters(n):
    hosts = []
    for h in range(n.hosts):
        ns = n.netns(h)
        hosts.append({"host": h, "netns": ns,
                      "rails": rail_ports(ns, [n.addr(h, r) for r in range(n.rails)]),
                      "lo": if_stats(ns, "lo")})
    spine = None
    if n.spine:
        spine = {"netns": n.spine_netns(),
                 "rails": rail_ports(n.spine_netns(), [n.spine_addr(r) for r in range(n.rails)])}
    return {"hosts": hosts, "spine": spine}
