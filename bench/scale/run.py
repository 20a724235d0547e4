#!/usr/bin/env python3
"""bench/scale/run.py - throughput and latency of a translation service
against any URL, at several numbers of clients, and which replicas answered.

    bench/scale/run.py URL [--clients 1,8,32,64] [--seconds 20] [--texts 1-4]
                       [--api-key KEY] [--json OUT]
    bench/scale/run.py --local DAEMON MODEL_DIR --replicas N [same options]

URL is a daemon or a balancer in front of several (Kubernetes: the Service
through `kubectl port-forward`, or an Ingress). Each client sends POST
/v1/translate with 1 to 4 texts (--texts) drawn from short and long
sentences, one request after another on a kept-alive connection, for
--seconds per level. Printed per level: requests, texts/s, p50 and p99,
failures, and the answers per replica: the balancer's X-Served-By
(deploy/haproxy.cfg sets it), else the X-Request-Id the replica made up
(REPLICA-N with --replica-id; Kubernetes: the pod's name).

Scaling is measured by running it twice against the same URL, with 1
replica and with N (`kubectl scale deploy/transformerd --replicas N` and
waiting for `kubectl rollout status`), and comparing texts/s at a level of
clients that saturates one replica. --local starts N (1 to 3) daemons of
DAEMON on loopback behind Debian's haproxy running deploy/haproxy.cfg (the
same set-up as tests/cluster.py): on one machine the replicas share its
cores, so this shows the balancer's overhead and spread, not scaling.

Python's standard library only (and haproxy for --local)."""
import argparse
import http.client
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHORT = ["Hello.", "Thank you.", "Good morning.", "Where is the station?", "I like tea.",
         "The cat sleeps.", "Open the door.", "See you tomorrow."]
LONG = ["The committee will meet again next week to discuss the budget for the coming year, "
        "and every member is asked to send their proposals before Friday.",
        "When the train finally arrived at the small station in the mountains, the travellers "
        "were tired, hungry and glad that the long journey was over.",
        "Please read the instructions carefully before you install the software, because some "
        "of the settings cannot be changed later without losing your data."]


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(math.ceil(q * len(xs))) - 1)]


def level(url, clients, seconds, texts, key):
    u = urllib.parse.urlsplit(url)
    host, port = u.hostname, u.port or 80
    base = u.path.rstrip("/")
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    lock = threading.Lock()
    lat, fails, per_replica, n_texts = [], [], {}, [0]
    stop = time.monotonic() + seconds

    def client(i):
        rng = random.Random(i)
        conn = None
        while time.monotonic() < stop:
            batch = [rng.choice(SHORT + LONG) for _ in range(rng.randint(*texts))]
            body = json.dumps({"text": batch}).encode()
            t0 = time.monotonic()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(host, port, timeout=300)
                conn.request("POST", base + "/v1/translate", body, headers)
                r = conn.getresponse()
                r.read()
                rid = r.getheader("X-Served-By") or r.getheader("X-Request-Id", "")
                ok = r.status == 200
                why = "HTTP %d" % r.status
            except (OSError, http.client.HTTPException) as e:
                conn, ok, rid, why = None, False, "", type(e).__name__
            dt = time.monotonic() - t0
            replica = (rid if r.getheader("X-Served-By") else rid.rsplit("-", 1)[0]) if ok and rid else "?"
            with lock:
                if ok:
                    lat.append(dt)
                    n_texts[0] += len(batch)
                    per_replica[replica] = per_replica.get(replica, 0) + 1
                else:
                    fails.append(why)

    t0 = time.monotonic()
    ths = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    wall = time.monotonic() - t0
    return {"clients": clients, "requests": len(lat), "failed": len(fails),
            "texts_per_s": round(n_texts[0] / wall, 1), "p50_ms": round(1e3 * pct(lat, 0.5), 1),
            "p99_ms": round(1e3 * pct(lat, 0.99), 1), "per_replica": per_replica,
            "failures": sorted(set(fails))[:5]}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def local(daemon, model, n, tmp):
    """N daemons behind haproxy (deploy/haproxy.cfg); returns (URL, procs)."""
    if not shutil.which("haproxy"):
        sys.exit("--local needs haproxy (apt-get install haproxy)")
    procs, ports = [], []
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for i in range(n):
        port = free_port()
        ports.append(port)
        procs.append(subprocess.Popen(
            ["setpriv", "--pdeathsig", "KILL", daemon, "serve", "--host", "127.0.0.1", "--port", str(port),
             "--model", model, "--replica-id", "r%d" % (i + 1), "--workers", "1", "--threads", "1",
             "--cache-bytes", "0", "--max-connections-per-ip", "0"], stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(tmp, "r%d.log" % (i + 1)), "wb"), env=env))
    for port in ports:
        for _ in range(600):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health/ready")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
    lb = free_port()
    henv = dict(os.environ, TD_LISTEN="127.0.0.1:%d" % lb, TD_ADMIN_SOCKET=os.path.join(tmp, "h.sock"))
    for i in range(3):  # the config names three servers: the missing ones point nowhere (DOWN)
        henv["TD_R%d" % (i + 1)] = "127.0.0.1:%d" % (ports[i] if i < n else free_port())
    procs.append(subprocess.Popen(["setpriv", "--pdeathsig", "KILL", "haproxy", "-db", "-f",
                                   os.path.join(ROOT, "deploy", "haproxy.cfg")],
                                  stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "haproxy.log"), "wb"),
                                  env=henv))
    time.sleep(2)  # two health checks (rise 2, inter 500 ms)
    return "http://127.0.0.1:%d" % lb, procs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url", nargs="?")
    ap.add_argument("--local", nargs=2, metavar=("DAEMON", "MODEL_DIR"))
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--clients", default="1,8,32,64")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--texts", default="1-4")
    ap.add_argument("--api-key")
    ap.add_argument("--json")
    a = ap.parse_args()
    lo, _, hi = a.texts.partition("-")
    texts = (int(lo), int(hi or lo))
    procs = []
    tmp = tempfile.mkdtemp(prefix="td-scale-")
    try:
        if a.local:
            if not 1 <= a.replicas <= 3:
                sys.exit("--replicas: 1 to 3 with --local")
            url, procs = local(os.path.abspath(a.local[0]), os.path.abspath(a.local[1]), a.replicas, tmp)
        elif a.url:
            url = a.url
        else:
            ap.error("a URL or --local")
        rows = []
        print("%-8s %9s %7s %10s %9s %9s  %s" % ("clients", "requests", "failed", "texts/s", "p50 ms",
                                                  "p99 ms", "answers per replica"))
        for c in [int(x) for x in a.clients.split(",")]:
            r = level(url, c, a.seconds, texts, a.api_key)
            rows.append(r)
            print("%-8d %9d %7d %10.1f %9.1f %9.1f  %s" % (c, r["requests"], r["failed"], r["texts_per_s"],
                                                          r["p50_ms"], r["p99_ms"],
                                                          " ".join("%s:%d" % kv for kv in sorted(r["per_replica"].items()))),
                  flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"url": url, "replicas": a.replicas if a.local else None, "levels": rows}, f, indent=1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
