#!/usr/bin/env python3
"""bench/load/stream_cache.py --daemon PATH --model DIR [options]

Two measurements of the daemon, standard library only:

streamed: one text of 100 sentences (the first 100 lines of the bundled
model's held-out test set, one a line: a line break ends a sentence) sent with "stream": true to a
daemon without a translation cache, ROUNDS times: the time to the first
sentence's event and to the whole answer (the "done" event), and their
ratio (target: the first sentence within a tenth of the whole).

repeated: a workload that repeats itself, REQUESTS requests of one sentence
each drawn from the 2,000 lines of the test set with Zipf weights (rank r
has weight 1/r^S, S 1.1 by default, a fixed seed), CLIENTS closed-loop
clients on keep-alive connections: sentences per second of the daemon with
its translation cache (the default --cache-bytes) against the same daemon
with --cache-bytes 0, run in turn (off, on, on, off) and pooled. Prints one
JSON line per run and the two tables.
"""
import argparse
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time

import td_daemon

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_SET = os.path.join(ROOT, "tests", "data", "en_de_test", "test.en")


SERVE_ARGS = []


def start(daemon, model, threads, extra):
    return td_daemon.start(daemon, ["--model", model, "--threads", str(threads),
                                    "--max-connections-per-ip", "0"] + SERVE_ARGS + extra,
                           env={"TRANSFORMERD_CACHE_BYTES": None}, prefix="td-sc-")


def stop(p):
    td_daemon.stop(p)


def streamed(daemon, model, threads, rounds):
    lines = open(TEST_SET).read().splitlines()[:100]
    body = json.dumps({"text": "\n".join(lines), "stream": True})  # a line a sentence
    p, port, _ = start(daemon, model, threads, ["--cache-bytes", "0"])
    runs = []
    try:
        for _ in range(rounds):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            t0 = time.monotonic()
            c.request("POST", "/v1/translate", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            first = whole = None
            events = 0
            buf = b""
            while True:
                chunk = r.read1(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n\n" in buf:
                    ev, buf = buf.split(b"\n\n", 1)
                    if ev.startswith(b"event: sentence"):
                        events += 1
                        if first is None:
                            first = time.monotonic() - t0
                    elif ev.startswith(b"event: done"):
                        whole = time.monotonic() - t0
            c.close()
            run = {"mode": "streamed", "sentences": events, "first_s": round(first, 4),
                   "whole_s": round(whole, 4), "first_over_whole": round(first / whole, 4)}
            print(json.dumps(run), flush=True)
            runs.append(run)
    finally:
        stop(p)
    return runs


def repeated(daemon, model, threads, requests, clients, zipf_s, seed):
    lines = open(TEST_SET).read().splitlines()
    weights = [1.0 / (r + 1) ** zipf_s for r in range(len(lines))]
    rng = random.Random(seed)
    order = lines[:]
    rng.shuffle(order)  # which sentence gets which rank
    draws = rng.choices(order, weights=weights, k=requests)
    distinct = len(set(draws))
    runs = []
    for mode in ("off", "on", "on", "off"):
        extra = ["--cache-bytes", "0"] if mode == "off" else []
        p, port, _ = start(daemon, model, threads, extra)
        try:
            pending = list(draws)
            lock = threading.Lock()
            errors = [0]

            def client():
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                while True:
                    with lock:
                        if not pending:
                            break
                        text = pending.pop()
                    c.request("POST", "/v1/translate", json.dumps({"text": text}),
                              {"Content-Type": "application/json"})
                    r = c.getresponse()
                    r.read()
                    if r.status != 200:
                        errors[0] += 1
                c.close()

            t0 = time.monotonic()
            th = [threading.Thread(target=client) for _ in range(clients)]
            for t in th:
                t.start()
            for t in th:
                t.join()
            dt = time.monotonic() - t0
            run = {"mode": "repeated", "cache": mode, "requests": requests, "distinct": distinct,
                   "clients": clients, "seconds": round(dt, 3),
                   "sentences_per_s": round(requests / dt, 1), "errors": errors[0]}
            print(json.dumps(run), flush=True)
            runs.append(run)
        finally:
            stop(p)
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", choices=["streamed", "repeated"])
    ap.add_argument("--serve-args", default="", help="more `serve` flags for every daemon")
    a = ap.parse_args()
    SERVE_ARGS.extend(a.serve_args.split())
    if a.only != "repeated":
        s = streamed(a.daemon, a.model, a.threads, a.rounds)
        f = statistics.median(r["first_s"] for r in s)
        w = statistics.median(r["whole_s"] for r in s)
        print("\n| text | sentences | first sentence s (median) | whole answer s (median) | "
              "first / whole |\n|---|---:|---:|---:|---:|")
        print("| 100 test-set lines, one text (a line a sentence) | %d | %.3f | %.3f | %.3fx |"
              % (s[0]["sentences"], f, w, f / w))
    if a.only != "streamed":
        r = repeated(a.daemon, a.model, a.threads, a.requests, a.clients, a.zipf, a.seed)
        off = statistics.mean(x["sentences_per_s"] for x in r if x["cache"] == "off")
        on = statistics.mean(x["sentences_per_s"] for x in r if x["cache"] == "on")
        print("\n| workload | cache off sent/s | cache on sent/s | on / off |\n|---|---:|---:|---:|")
        print("| %d requests, Zipf %.2f over 2,000 sentences (%d distinct), %d clients | "
              "%.1f (%s) | %.1f (%s) | %.2fx |"
              % (a.requests, a.zipf, r[0]["distinct"], a.clients, off,
                 ", ".join(str(x["sentences_per_s"]) for x in r if x["cache"] == "off"), on,
                 ", ".join(str(x["sentences_per_s"]) for x in r if x["cache"] == "on"), on / off))
    return 0


if __name__ == "__main__":
    sys.exit(main())
