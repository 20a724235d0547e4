#!/usr/bin/env python3
"""One large request against short ones: how long a short request waits.

For each daemon binary given (e.g. the build before a change and after it),
one after the other on the same machine: start `DAEMON serve` on a free
loopback port, send one request of SENTENCES lines of the input (a list,
one job per line) from one thread and, while it runs, CLIENTS closed-loop
clients that each send one short line at a time from other threads; stop
when the large request is answered. Prints per daemon the large request's
time and the short requests' count, p50 and p99 latency, and at the end the
ratio of the short p99s (each daemon against the first).

    bench/load/fairness.py --daemon OLD --daemon NEW --model models/en-de \\
        --input tests/data/en_de_test/test.en [--sentences 1000] [--clients 4]

Python's standard library only. Every wait is bounded (--timeout).
"""
import argparse
import json
import threading
import time
import urllib.request

import td_daemon


def post(url, body, timeout):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def start(daemon, model, threads):
    # the queue's order under load, not the translation cache (repeated texts would be hits)
    return td_daemon.start(daemon, ["--model", model, "--threads", str(threads),
                                    "--max-batch-texts", "4096", "--max-queue", "8192",
                                    "--request-timeout-s", "3600"],
                           env={"TRANSFORMERD_CACHE_BYTES": "0"}, prefix="td-fair-")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def run(daemon, args, big_lines, short_lines):
    p, port, log = start(daemon, args.model, args.threads)
    url = "http://127.0.0.1:%d/v1/translate" % port
    try:
        post(url, {"text": short_lines[0]}, args.timeout)  # warm
        done = threading.Event()
        big = {}

        t_big = [time.monotonic()]

        def big_main():
            t0 = t_big[0] = time.monotonic()
            st, _ = post(url, {"text": big_lines}, args.timeout)
            big["status"], big["s"] = st, time.monotonic() - t0
            done.set()

        lat = [[] for _ in range(args.clients)]
        fails = [0]

        def short_main(k):
            i = k
            while not done.is_set():
                t0 = time.monotonic()
                try:
                    st, _ = post(url, {"text": short_lines[i % len(short_lines)]}, args.timeout)
                    if st == 200:
                        lat[k].append(time.monotonic() - t0)
                        if args.verbose:
                            print("short %d at %.2f s: %.2f s" % (k, t0 - t_big[0],
                                                                  time.monotonic() - t0))
                    else:
                        fails[0] += 1
                except Exception:
                    fails[0] += 1
                i += args.clients

        tb = threading.Thread(target=big_main)
        tb.start()
        time.sleep(0.5)  # the large request is queued first
        ts = [threading.Thread(target=short_main, args=(k,)) for k in range(args.clients)]
        for t in ts:
            t.start()
        tb.join(args.timeout)
        done.set()
        for t in ts:
            t.join(args.timeout)
        xs = [x for l in lat for x in l]
        return {"daemon": daemon, "big_status": big.get("status"), "big_s": big.get("s"),
                "short_n": len(xs), "short_fail": fails[0], "short_p50_s": pct(xs, 0.5),
                "short_p99_s": pct(xs, 0.99)}
    finally:
        td_daemon.stop(p, log)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", action="append", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--verbose", action="store_true", help="print every short request")
    args = ap.parse_args()
    lines = [l.strip() for l in open(args.input, encoding="utf-8") if l.strip()]
    big_lines = lines[:args.sentences]
    # the short ones: the input's lines of 1..4 words
    short_lines = [l for l in lines[args.sentences:] if 1 <= len(l.split()) <= 4][:200]
    res = [run(d, args, big_lines, short_lines) for d in args.daemon]
    for r in res:
        print(json.dumps(r))
    print()
    print("| daemon | large request (s) | short requests | short p50 (s) | short p99 (s) | p99 vs first |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in res:
        print("| %s | %.1f | %d | %.2f | %.2f | %.3fx |" % (
            r["daemon"], r["big_s"] or float("nan"), r["short_n"], r["short_p50_s"],
            r["short_p99_s"], r["short_p99_s"] / res[0]["short_p99_s"]))


if __name__ == "__main__":
    main()
