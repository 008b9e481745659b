#!/usr/bin/env python3
"""cluster_topo_file: the topology files ferry-cluster writes for its hosts (docs/cluster.md,
"Topology files"). 2 hosts x 4 rails x 2 ranks, shaped to 400mbit, while the caller exports
its own NCCL_TOPO_FILE: every rank prints its NCCL_TOPO_FILE, the file, and
`ferry-topo --rails --json` (the library's detect() under the rank's environment). Each host
must have its own file under the run's state directory, with per rail r a PCI switch under
CPU 0 holding GPU r (dev r) and the NIC of net r<r> (dev r, speed 400); ferry-topo must pair
GPU r with NIC r<r> at PIX; the files must be gone after the run. Then an unshaped run
(speed 10000) and --no-topo-file (the caller's NCCL_TOPO_FILE passes through).
Exit 77 (skip) when the launcher skips."""
import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

CALLER_FILE = "/nonexistent/caller-topo.xml"
SHOW = ('echo "FILE ${NCCL_TOPO_FILE-unset} ${FERRY_TOPO_FILE_ONLY-unset}"; '
        '[ -e "$NCCL_TOPO_FILE" ] && sed "s/^/XML /" "$NCCL_TOPO_FILE" && "$0" --rails --json; true')


def fail(msg, out=""):
    print("FAIL: " + msg + ("\n" + out if out else ""), flush=True)
    sys.exit(1)


def launch(a, opts, env_extra):
    cmd = [a.launcher] + opts + ["--timeout", "50", "--", "sh", "-c", SHOW, a.topo]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(os.environ, **env_extra))
    print(p.stdout, end="")
    if p.returncode == 77:
        sys.exit(77)
    if p.returncode != 0:
        fail("ferry-cluster %s exited %d" % (" ".join(opts), p.returncode))
    return p.stdout


def rank_lines(out, rank):
    """{'FILE': [...], 'XML': [...], 'JSON': [...]} of one rank's output."""
    got = {"FILE": [], "XML": [], "JSON": []}
    for line in out.splitlines():
        m = re.match(r"^\[h\d+\.r(\d+)\] (.*)$", line)
        if not m or int(m.group(1)) != rank:
            continue
        text = m.group(2)
        if text.startswith("FILE ") or text.startswith("XML "):
            key, _, rest = text.partition(" ")
            got[key].append(rest)
        elif text.startswith("{"):
            got["JSON"].append(text)
    return got


def check_xml(text, rails, mbits, where):
    """The layout of docs/cluster.md; returns the GPUs' bus ids by rail."""
    root = ET.fromstring(text)
    cpus = root.findall("cpu")
    if root.tag != "system" or len(cpus) != 1 or cpus[0].get("numaid") != "0":
        fail("%s: want <system> with one <cpu numaid=\"0\">" % where, text)
    if len(list(root.iter("gpu"))) != rails or len(list(root.iter("net"))) != rails:
        fail("%s: want %d GPUs and %d nets" % (where, rails, rails), text)
    switches = cpus[0].findall("pci")
    if len(switches) != rails:
        fail("%s: %d PCI switches under the CPU, want %d" % (where, len(switches), rails), text)
    gpus = []
    for r, sw in enumerate(switches):
        kids = sw.findall("pci")
        gpu = [k for k in kids if k.get("class") == "0x030200"]
        nic = [k for k in kids if k.get("class") == "0x020000"]
        if sw.get("class") != "0x060400" or len(kids) != 2 or len(gpu) != 1 or len(nic) != 1:
            fail("%s: switch %d must be class 0x060400 with one GPU and one NIC" % (where, r), text)
        g = gpu[0].findall("gpu")
        nets = nic[0].findall("nic/net")
        if len(g) != 1 or g[0].get("dev") != str(r):
            fail("%s: the GPU under switch %d must be <gpu dev=\"%d\">" % (where, r, r), text)
        want = {"name": "r%d" % r, "dev": str(r), "speed": str(mbits)}
        if len(nets) != 1 or any(nets[0].get(k) != v for k, v in want.items()):
            fail("%s: the NIC under switch %d must have one net %s" % (where, r, want), text)
        gpus.append(gpu[0].get("busid"))
    buses = [p.get("busid") for p in root.iter("pci")]
    if len(set(buses)) != len(buses):
        fail("%s: duplicate bus ids %s" % (where, buses))
    return gpus


def check_run(a, out, hosts, rails, per, mbits):
    files = {}
    for rank in range(hosts * per):
        host, where = rank // per, "rank %d" % rank
        got = rank_lines(out, rank)
        if len(got["FILE"]) != 1:
            fail("%s: no FILE line" % where)
        path, only = got["FILE"][0].split()
        if not re.match(r"^/run/ferry-cluster/\d+\.topo/h%d\.xml$" % host, path) or only != "1":
            fail("%s: NCCL_TOPO_FILE=%s FERRY_TOPO_FILE_ONLY=%s" % (where, path, only))
        if files.setdefault(host, path) != path:
            fail("%s: %s, but host %d's other ranks got %s" % (where, path, host, files[host]))
        gpus = check_xml("\n".join(got["XML"]), rails, mbits, where)
        if len(got["JSON"]) != 1:
            fail("%s: no ferry-topo JSON line" % where)
        have = [(x["gpu"], x["nic"], x["path"]) for x in json.loads(got["JSON"][0])["rails"]]
        want = [(gpus[r], "r%d" % r, "PIX") for r in range(rails)]
        if have != want:
            fail("%s: ferry-topo rails %s, want %s" % (where, have, want))
    if len(set(files.values())) != hosts:
        fail("hosts share files: %s" % files)
    left = [p for p in files.values() if os.path.exists(p) or os.path.exists(os.path.dirname(p))]
    if left:
        fail("topology files left after the run: %s" % left)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launcher", required=True)
    ap.add_argument("--topo", required=True, help="ferry-topo")
    a = ap.parse_args()

    out = launch(a, ["--hosts", "2", "--rails", "4", "--ranks-per-host", "2", "--shape", "400mbit"],
                 {"NCCL_TOPO_FILE": CALLER_FILE})
    check_run(a, out, 2, 4, 2, 400)
    if "NCCL_TOPO_FILE=" + CALLER_FILE not in out:
        fail("no log line about the caller's NCCL_TOPO_FILE")

    out = launch(a, ["--hosts", "1", "--rails", "2"], {})
    check_run(a, out, 1, 2, 1, 10000)

    out = launch(a, ["--hosts", "1", "--no-topo-file"], {"NCCL_TOPO_FILE": CALLER_FILE})
    if rank_lines(out, 0)["FILE"] != [CALLER_FILE + " unset"] or "topology files in" in out:
        fail("--no-topo-file: the rank must see the caller's NCCL_TOPO_FILE and no file of ours")
    print("OK: per-host topology files, GPU i -> NIC r<i> (PIX), 400 and 10000 Mbit/s, --no-topo-file")


if __name__ == "__main__":
    main()
