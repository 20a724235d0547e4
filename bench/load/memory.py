#!/usr/bin/env python3
"""bench/load/memory.py --daemon PATH [--models DIR] [--many N] [--model DIR]

The daemon's resident memory (VmRSS of /proc/PID/status) with its workers'
memory on demand (--scratch on-demand, the default) and allocated at start
(--scratch full), standard library only:

both: `make run`'s daemon (--models-dir DIR, the bundled models; its
defaults, so two workers a model on 2 or more cores) after it is ready, and
after a load: LINES lines of the bundled test set sent by 8 keep-alive
clients, one line a request, then 5 requests of 40 lines each; RSS against
what /v1/models reports (weights plus the workers' scratch now: the shared
workers', or each model's own from a daemon before they were shared).

many: one daemon serving the model directory MODEL under N names (links in
a temporary directory), after it is ready: RSS against N x the weights.

Prints one JSON line per measurement and a markdown table.
"""
import argparse
import http.client
import json
import os
import shutil
import tempfile
import threading

import td_daemon

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_SET = os.path.join(ROOT, "tests", "data", "en_de_test", "test.en")
MIB = 1 << 20


def rss(p):
    for line in open("/proc/%d/status" % p.pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def listing(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("GET", "/v1/models")
    return json.loads(c.getresponse().read())


def models(port):
    return listing(port)["models"]


def reported(port):
    """Models, their weights, the workers' scratch now: the shared workers'
    (memory.workers) or, from a daemon before them, each model's own."""
    j = listing(port)
    models_ = j["models"]
    weights = sum(m["memory"]["weight_bytes"] for m in models_)
    shared = j["memory"].get("workers")
    scratch = shared["scratch_bytes"] if shared else sum(m["memory"]["scratch_bytes"]
                                                         for m in models_)
    return len(models_), weights, scratch


def load(port, lines):
    """8 clients, one line a request, then 5 requests of 40 lines."""
    names = [m["name"] for m in models(port)]
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    waiting = list(enumerate(lines))  # (index, line) not yet sent
    lock = threading.Lock()

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        while True:
            with lock:
                if not waiting:
                    return
                i, line = waiting.pop()
            body = json.dumps({"text": line, "model": names[i % len(names)]})
            conn.request("POST", "/v1/translate", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                raise SystemExit("status %d" % r.status)

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(5):
        body = json.dumps({"text": lines[40 * k:40 * k + 40], "model": names[k % len(names)]})
        c.request("POST", "/v1/translate", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()


def both(daemon, models_dir, n_lines):
    lines = open(TEST_SET).read().splitlines()[:n_lines]
    rows = []
    for mode in ("on-demand", "full"):
        p, port, log = td_daemon.start(daemon, ["--models-dir", models_dir, "--scratch", mode,
                                                "--max-connections-per-ip", "0"],
                                       env={"TRANSFORMERD_CACHE_BYTES": "0"}, prefix="td-mem-")
        try:
            for when in ("after start", "after the load"):
                if when == "after the load":
                    load(port, lines)
                n, weights, scratch = reported(port)
                r = {"mode": mode, "when": when, "models": n, "rss": rss(p),
                     "weights": weights, "scratch": scratch}
                print(json.dumps(r), flush=True)
                rows.append(r)
        finally:
            td_daemon.stop(p, log)
    print()
    print("| `--scratch` | when | models | RSS (MiB) | weights (MiB) | workers' scratch now (MiB) "
          "| RSS - weights - scratch (MiB) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print("| %s | %s | %d | %.1f | %.1f | %.1f | %.1f |" % (
            r["mode"], r["when"], r["models"], r["rss"] / MIB, r["weights"] / MIB,
            r["scratch"] / MIB, (r["rss"] - r["weights"] - r["scratch"]) / MIB))
    print()


def many(daemon, model, n):
    tmp = tempfile.mkdtemp(prefix="td-mem-models-")
    try:
        for i in range(n):
            os.symlink(os.path.abspath(model), os.path.join(tmp, "m%02d" % i))
        p, port, log = td_daemon.start(daemon, ["--models-dir", tmp],
                                       env={"TRANSFORMERD_CACHE_BYTES": "0"}, prefix="td-mem-")
        try:
            k, weights, scratch = reported(port)
            r = {"mode": "on-demand", "models": k, "rss": rss(p), "weights": weights,
                 "scratch": scratch}
            print(json.dumps(r), flush=True)
        finally:
            td_daemon.stop(p, log)
    finally:
        shutil.rmtree(tmp)
    print()
    print("| models | RSS (MiB) | weights (MiB) | RSS - weights (MiB) | workers' scratch (MiB) |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    print("| %d | %.1f | %.1f | %.1f | %.1f |" % (r["models"], r["rss"] / MIB, r["weights"] / MIB,
                                                 (r["rss"] - r["weights"]) / MIB,
                                                 r["scratch"] / MIB))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "en-de"))
    ap.add_argument("--lines", type=int, default=600)
    ap.add_argument("--many", type=int, default=20)
    ap.add_argument("--only", choices=["both", "many"])
    a = ap.parse_args()
    if a.only != "many":
        both(a.daemon, a.models, a.lines)
    if a.only != "both":
        many(a.daemon, a.model, a.many)


if __name__ == "__main__":
    main()
