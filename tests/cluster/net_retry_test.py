#!/usr/bin/env python3
"""ctest driver: the Socket network's retry (FERRY_NET_RETRY_MS) across two namespace hosts.

cluster_colls runs its checked AllReduce loop (FERRY_CLUSTER_LOOP_MS, 4 MiB floats, exact)
on 2 hosts x 1 rank over the Socket network while this script disturbs the link between them,
starting once every rank printed `LOOP running`:

--fault reset: `ss -K` (SOCK_DESTROY) on the Socket network's connections only (found from
  the ranks' `listening on` INFO lines), alternately on the sending host (ECONNABORTED there,
  RST to the receiver) and on the receiving host, 3 times. Every rank must finish the loop
  (exit 0) and the logs must show the retry at work: a `broke` WARN and a `resumed` line.
--fault flap: `ip link set <veth> down; sleep 1; up` on host 1's switch port, twice. Every
  rank must finish; TCP usually rides out a 1 s flap by retransmitting, so the script only
  reports whether the retry path ran.

Exit 77 (skip) when ferry-cluster skips (not root, no `ip netns`) or `ss -K` is unsupported.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77


def fail(msg):
    print("NET RETRY TEST FAIL: " + msg, flush=True)
    sys.exit(1)


def sh(cmd):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class Launch:
    """ferry-cluster in the background; its output is collected line by line."""

    def __init__(self, args, logdir, hosts=2, rails=1, per_host=1, extra_env=None):
        env = dict(os.environ)
        env.update({"FERRY_CLUSTER_LOOP_MS": str(args.loop_ms), "FERRY_NET_RETRY_MS": str(args.retry_ms),
                    "NCCL_NET": "Socket", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
                    "NCCL_DEBUG_FILE": os.path.join(logdir, "rank.%p.log"),
                    "FERRY_CLUSTER_WATCHDOG_S": str(args.timeout - 5)})
        if getattr(args, "nthreads", None) is not None:
            env["NCCL_SOCKET_NTHREADS"] = str(args.nthreads)
        env.update(extra_env or {})
        cmd = [args.launcher, "--hosts", str(hosts), "--rails", str(rails), "--ranks-per-host",
               str(per_host), "--timeout", str(args.timeout), "--", args.bin]
        print("+ " + " ".join(cmd), flush=True)
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            sys.stdout.write(line)
            with self.cv:
                self.lines.append(line)
                self.cv.notify_all()

    def netns(self, host):
        return "fc%d-h%d" % (self.p.pid, host)

    def wait_for(self, pattern, count, timeout_s):
        end = time.time() + timeout_s
        with self.cv:
            while sum(1 for l in self.lines if pattern in l) < count:
                if self.p.poll() is not None or time.time() > end:
                    return False
                self.cv.wait(0.2)
        return True


def rank_logs(logdir):
    """Every rank's NCCL_DEBUG_FILE (rank.<pid>.log), concatenated."""
    logs = ""
    for path in sorted(glob.glob(os.path.join(logdir, "rank.*.log"))):
        with open(path, errors="replace") as f:
            logs += f.read()
    return logs


def listeners(logdir):
    """{host address: Socket-network listening port} from the ranks' INFO lines."""
    found = {}
    for path in glob.glob(os.path.join(logdir, "rank.*.log")):
        with open(path, errors="replace") as f:
            for m in re.finditer(r"NET/Socket: listening on ([0-9.]+)<(\d+)>", f.read()):
                found[m.group(1)] = int(m.group(2))
    return found


def reset(launch, logdir, rounds):
    ports = listeners(logdir)
    if len(ports) != 2:
        fail("expected the Socket network listeners of 2 hosts in the logs, found %s" % ports)
    addrs = sorted(ports)  # host 0 has .1, host 1 has .2
    for i in range(rounds):
        victim = addrs[1]
        if i % 2 == 0:  # the sending side: host 0's connections to host 1's listener
            cmd = ["ss", "-K", "dst", victim, "dport", "=", ":%d" % ports[victim]]
            ns = launch.netns(0)
        else:  # the receiving side: host 1's accepted sockets (local port = its listener's)
            cmd = ["ss", "-K", "src", victim, "sport", "=", ":%d" % ports[victim]]
            ns = launch.netns(1)
        p = sh(["ip", "netns", "exec", ns] + cmd)
        print(p.stdout, flush=True)
        if "ESTAB" not in p.stdout:
            fail("ss -K found no connection to kill (round %d)" % i)
        time.sleep(0.7)


def flap(launch, rounds):
    veth = "fc%dh1r0" % launch.p.pid  # host 1's port on the rail-0 switch (root namespace)
    for _ in range(rounds):
        if sh(["ip", "link", "set", veth, "down"]).returncode != 0:
            fail("cannot set %s down" % veth)
        time.sleep(1.0)
        sh(["ip", "link", "set", veth, "up"])
        time.sleep(0.5)


def ss_kill_supported():
    p = subprocess.run(["ss", "-K", "dst", "192.0.2.1"], capture_output=True, text=True)
    return p.returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launcher", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--fault", choices=["reset", "flap"], required=True)
    ap.add_argument("--nthreads", type=int)
    ap.add_argument("--loop-ms", type=int, default=7000)
    ap.add_argument("--retry-ms", type=int, default=10000)
    ap.add_argument("--timeout", type=int, default=80)
    args = ap.parse_args()
    if args.fault == "reset" and os.geteuid() == 0 and not ss_kill_supported():
        print("SKIP: ss -K (CONFIG_INET_DIAG_DESTROY) is not supported here", flush=True)
        return SKIP
    logdir = tempfile.mkdtemp(prefix="ferry-net-retry-")
    launch = Launch(args, logdir)
    if not launch.wait_for("LOOP running", 2, args.timeout - 20):
        rc = launch.p.wait()
        if rc == SKIP:
            return SKIP
        fail("the ranks never started their loop (launcher exit %s)" % rc)
    time.sleep(0.3)
    if args.fault == "reset":
        reset(launch, logdir, 3)
    else:
        flap(launch, 2)
    rc = launch.p.wait()
    out = "".join(launch.lines)
    logs = rank_logs(logdir)
    breaks = [l for l in logs.splitlines() if "WARN" in l and " broke (" in l]
    resumes = [l for l in logs.splitlines() if "resumed after" in l]
    print("retry path: %d break WARNs, %d resumes" % (len(breaks), len(resumes)), flush=True)
    for l in (breaks + resumes)[:12]:
        print("  " + l.strip(), flush=True)
    if rc != 0:
        fail("launcher exit %d (a rank failed; logs in %s)" % (rc, logdir))
    if len(re.findall(r"^\[h\d\.r\d\] OK loop: \d+ AllReduce iterations$", out, re.M)) != 2:
        fail("not every rank finished its loop")
    if args.fault == "reset" and (not breaks or not resumes):
        fail("the resets did not go through the retry path (logs in %s)" % logdir)
    if args.fault == "flap" and not breaks:
        print("note: TCP rode out the flaps; the retry path did not run", flush=True)
    subprocess.run(["rm", "-rf", logdir])
    print("NET RETRY TEST OK (%s)" % args.fault, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
