#!/usr/bin/env python3
"""LibreTranslate 1.9.6 itself against transformerd on the same Argos
Translate packages, the same cores and the same client load (bench/libre/run.sh
makes the venv and the packages, then runs this).

Both serve LibreTranslate's POST /translate; N clients (each level of
--levels) keep one request each in flight until every input line was sent
once (or --max-seconds passed); the input mixes lengths: the held-out lines
shuffled with a fixed seed, every third one joined with the two after it
(paragraphs of three sentences). Before each timed level a server gets an
untimed pass at the same concurrency on other lines (two per client). Each round runs every level against both
servers in turn (the order reversed in every other round). Per server and
level: lines/s, source characters/s, p50 and p90 latency; then
transformerd / LibreTranslate: throughput ratio and p50 ratio. Also the
share of lines both answered identically (the same model and the same
beam: they should mostly agree; CTranslate2's length penalty and
argos-translate's own sentence splitting make the rest).

    run.py --daemon build/transformerd --packages DIR --lt VENV/bin/libretranslate
           [--levels 1,8,32] [--lines 240] [--rounds 1] [--max-seconds 120]
           [--threads N] [--lt-threads N] [--td-args "--models-dir DIR"] [--out results.jsonl]
"""
import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "load"))
import td_daemon  # noqa: E402


def post(port, text, timeout=600):
    body = json.dumps({"q": text, "source": "en", "target": "de", "format": "text"}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/translate" % port, data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())["translatedText"]


def start_lt(lt, packages, threads):
    """LibreTranslate on a free port, offline, on the packages; (process, port, log)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    home = tempfile.mkdtemp(prefix="lt-home-")
    log = tempfile.NamedTemporaryFile(prefix="lt-", suffix=".log", delete=False)
    env = dict(os.environ, ARGOS_PACKAGES_DIR=packages, ARGOS_CHUNK_TYPE="SPACY", HOME=home,
               XDG_DATA_HOME=os.path.join(home, "data"), XDG_CACHE_HOME=os.path.join(home, "cache"),
               ARGOS_INTRA_THREADS=str(threads))
    p = subprocess.Popen(["setpriv", "--pdeathsig", "KILL", lt, "--host", "127.0.0.1",
                          "--port", str(port), "--load-only", "en,de"],
                         stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    for _ in range(1800):
        if p.poll() is not None:
            break
        try:
            post(port, "Hello.", timeout=120)
            return p, port, log.name
        except Exception:
            time.sleep(0.2)
    stop_lt(p)
    sys.exit("LibreTranslate did not get ready:\n" + open(log.name, errors="replace").read()[-4000:])


def stop_lt(p):
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)
    except Exception:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except Exception:
            pass


def make_input(path, n, seed):
    lines = [l.strip() for l in open(path, encoding="utf-8") if l.strip()]
    random.Random(seed).shuffle(lines)
    out, i = [], 0
    while len(out) < n and i < len(lines):
        if len(out) % 3 == 2 and i + 3 <= len(lines):
            out.append(" ".join(lines[i:i + 3]))
            i += 3
        else:
            out.append(lines[i])
            i += 1
    return out


def run_level(port, texts, clients, max_seconds):
    """Every text once through `clients` concurrent clients; per-text latency."""
    lock = threading.Lock()
    nxt = [0]
    lat = [None] * len(texts)
    answers = [None] * len(texts)
    errors = []
    deadline = time.monotonic() + max_seconds

    def worker():
        while True:
            with lock:
                i = nxt[0]
                if i >= len(texts) or time.monotonic() > deadline:
                    return
                nxt[0] += 1
            t0 = time.monotonic()
            try:
                answers[i] = post(port, texts[i])
                lat[i] = time.monotonic() - t0
            except Exception as e:  # counted, reported
                errors.append(str(e))

    t0 = time.monotonic()
    th = [threading.Thread(target=worker) for _ in range(clients)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.monotonic() - t0
    done = [i for i in range(len(texts)) if lat[i] is not None]
    lats = sorted(lat[i] for i in done)
    return {
        "lines": len(done), "errors": len(errors), "wall_s": wall,
        "lines_per_s": len(done) / wall if wall else 0.0,
        "chars_per_s": sum(len(texts[i]) for i in done) / wall if wall else 0.0,
        "p50_s": statistics.median(lats) if lats else None,
        "p90_s": lats[int(0.9 * (len(lats) - 1))] if lats else None,
    }, answers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--packages", required=True)
    ap.add_argument("--lt", required=True)
    ap.add_argument("--input", default=os.path.join(ROOT, "tests/data/en_de_test/test.en"))
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--lines", type=int, default=240)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=120)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    # LibreTranslate's CTranslate2 threads (ARGOS_INTRA_THREADS), when not
    # --threads: its libgomp may do better with fewer than the cores
    ap.add_argument("--lt-threads", type=int, default=None)
    ap.add_argument("--td-args", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    texts = make_input(a.input, a.lines, 1)
    warm = make_input(a.input, 64, 2)
    levels = [int(x) for x in a.levels.split(",")]
    # the answer cache off: every level sends the same lines again
    td_args = (a.td_args.split() if a.td_args else ["--models-dir", a.packages]) + [
        "--threads", str(a.threads), "--cache-bytes", "0"]
    td, td_port, td_log = td_daemon.start(a.daemon, td_args, prefix="td-libre-")
    lt, lt_port, lt_log = start_lt(a.lt, a.packages, a.lt_threads or a.threads)
    results = {("td", l): [] for l in levels}
    results.update({("lt", l): [] for l in levels})
    same = []
    out = open(a.out, "w") if a.out else None
    try:
        # warm both (first requests load the models lazily in argos-translate)
        for port in (td_port, lt_port):
            run_level(port, texts[:8], 4, a.max_seconds)
        for r in range(a.rounds):
            for level in levels:
                order = [("td", td_port), ("lt", lt_port)]
                if r % 2:
                    order.reverse()
                got = {}
                for name, port in order:
                    # untimed, at the level's concurrency, on other lines:
                    # what a server grows for N clients (transformerd's
                    # worker buffers, a one-time cost of a daemon's life)
                    # is grown before the clock starts
                    run_level(port, warm[:max(8, 2 * level)], level, a.max_seconds)
                    res, answers = run_level(port, texts, level, a.max_seconds)
                    res.update(server=name, clients=level, round=r)
                    results[(name, level)].append(res)
                    got[name] = answers
                    print(json.dumps(res), flush=True)
                    if out:
                        out.write(json.dumps(res) + "\n")
                pairs = [(x, y) for x, y in zip(got["td"], got["lt"]) if x is not None and y is not None]
                if pairs:
                    same.append(sum(x == y for x, y in pairs) / len(pairs))
    finally:
        td_daemon.stop(td)
        stop_lt(lt)
    print()
    print("| clients | LT lines/s | td lines/s | td/LT throughput | LT p50 s | td p50 s | td/LT p50 |")
    print("|---|---|---|---|---|---|---|")
    for level in levels:
        lt_r, td_r = results[("lt", level)], results[("td", level)]
        lt_tp = max(x["lines_per_s"] for x in lt_r)
        td_tp = max(x["lines_per_s"] for x in td_r)
        lt_p50 = min(x["p50_s"] for x in lt_r)
        td_p50 = min(x["p50_s"] for x in td_r)
        print("| %d | %.2f | %.2f | %.2fx | %.3f | %.3f | %.2fx |" % (
            level, lt_tp, td_tp, td_tp / lt_tp, lt_p50, td_p50, td_p50 / lt_p50))
    if same:
        print("\nidentical answers: %.1f %% of lines" % (100 * statistics.mean(same)))


if __name__ == "__main__":
    main()
