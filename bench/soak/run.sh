#!/bin/sh
# The daemon over a long run: REQUESTS requests (default 50,000) from
# CLIENTS keep-alive clients (default 8), a fixed mix of endpoints and
# outcomes, the daemon's RSS sampled every SAMPLE requests (default 5,000).
# Prints a markdown table (requests, RSS, its change since the first
# sample, requests/s over the interval, statuses) and a verdict line: the
# RSS of the last sample against the first after warm-up. Exits 1 when a
# request fails at the transport or a status is not the mix's, or when the
# daemon does not exit 0 on SIGTERM.
#
#   bench/soak/run.sh                          (the fixture model)
#   REQUESTS=5000 SAMPLE=500 bench/soak/run.sh  (a short run)
#
# The mix, by request number mod 10: 0-4 POST /v1/translate (a short text;
# a list of 3 with beam 3 and 2 hypotheses; return_tokens; attention of the
# last layer; an empty text), 5 POST /translate (LibreTranslate, a list
# with an alternative), 6 a 400 (unknown field), 7 a 422 (over
# --max-response-bytes, set to 64 KiB here so that the limit is reached
# with the fixture), 8 GET /health/ready, 9 GET /metrics.
#
# Environment: MODEL (default tests/data/text/marian_en_de), BUILD (build),
# THREADS (engine threads, 1), MAX_SECONDS (bound on the whole run, 900),
# OUT (/tmp/transformerd-soak: the daemon's log).
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
MODEL=${MODEL:-tests/data/text/marian_en_de}
OUT=${OUT:-/tmp/transformerd-soak}
mkdir -p "$OUT"
[ -x "$BUILD/transformerd" ] || { echo "soak: build $BUILD/transformerd first (make build)" >&2; exit 2; }
"$BUILD/transformerd" serve --model "$MODEL" --port 0 --threads "${THREADS:-1}" \
    --log-format json --max-response-bytes 65536 2>"$OUT/daemon.log" &
pid=$!
port=
for _ in $(seq 1 600); do
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$OUT/daemon.log" | head -n 1)
    grep -q "ready:" "$OUT/daemon.log" && [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ] || ! grep -q "ready:" "$OUT/daemon.log"; then
    echo "soak: the daemon did not get ready; see $OUT/daemon.log" >&2
    kill "$pid" 2>/dev/null
    exit 1
fi
status=0
PORT=$port PID=$pid python3 - <<'PY' || status=1
import http.client, json, os, sys, threading, time
port, pid = int(os.environ["PORT"]), int(os.environ["PID"])
total = int(os.environ.get("REQUESTS", "50000"))
sample = int(os.environ.get("SAMPLE", "5000"))
clients = int(os.environ.get("CLIENTS", "8"))
deadline = time.time() + float(os.environ.get("MAX_SECONDS", "900"))
J = {"Content-Type": "application/json"}
MIX = [
    ("POST", "/v1/translate", {"text": "Hello world"}, 200),
    ("POST", "/v1/translate", {"text": ["the test.", "Hello world", "a"], "beam_size": 3,
                               "num_hypotheses": 2}, 200),
    ("POST", "/v1/translate", {"text": "Open the window", "return_tokens": True}, 200),
    ("POST", "/v1/translate", {"text": "the test.", "return_attention": True,
                               "attention_layers": [-1]}, 200),
    ("POST", "/v1/translate", {"text": ["", "  "]}, 200),
    ("POST", "/translate", {"q": ["Hello world", "the test."], "source": "en", "target": "de",
                            "alternatives": 1}, 200),
    ("POST", "/v1/translate", {"text": "a", "nope": 1}, 400),
    ("POST", "/v1/translate", {"text": ["Hello world"] * 8, "return_attention": True,
                               "max_length": 120}, 422),
    ("GET", "/health/ready", None, 200),
    ("GET", "/metrics", None, 200),
]
lock = threading.Lock()
state = {"next": 0, "done": 0, "bad": 0, "statuses": {}}
samples = []

def rss_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1

def worker():
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while True:
        with lock:
            i = state["next"]
            if i >= total or time.time() > deadline:
                return
            state["next"] += 1
        method, path, body, want = MIX[i % len(MIX)]
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers=J if data else {})
            r = conn.getresponse()
            r.read()
            st = r.status
        except Exception as e:  # transport failure: reconnect, count it
            st = 0
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        with lock:
            state["statuses"][st] = state["statuses"].get(st, 0) + 1
            if st != want:
                state["bad"] += 1
                if state["bad"] <= 5:
                    print(f"soak: request {i} {method} {path}: {st}, want {want}", file=sys.stderr)
            state["done"] += 1
            if state["done"] % sample == 0:
                samples.append((state["done"], rss_kib(), time.time(), dict(state["statuses"])))

t0 = time.time()
samples.append((0, rss_kib(), t0, {}))
th = [threading.Thread(target=worker) for _ in range(clients)]
for t in th: t.start()
for t in th: t.join()
print(f"| requests | RSS (MiB) | change since {sample} | req/s | 200 / 400 / 422 / other |")
print("|---:|---:|---:|---:|---|")
base = samples[1][1] if len(samples) > 1 else samples[0][1]
for k, (n, rss, t, st) in enumerate(samples):
    rate = (n - samples[k - 1][0]) / (t - samples[k - 1][2]) if k else 0
    other = sum(v for s, v in st.items() if s not in (200, 400, 422))
    ch = "" if k == 0 else f"{(rss - base) / 1024:+.1f}"
    print(f"| {n} | {rss / 1024:.1f} | {ch} | {rate:.0f} | "
          f"{st.get(200, 0)} / {st.get(400, 0)} / {st.get(422, 0)} / {other} |")
n, rss, t, _ = samples[-1]
print(f"\n{state['done']} requests in {t - t0:.0f} s, {state['bad']} unexpected; "
      f"RSS {base / 1024:.1f} MiB after {sample} -> {rss / 1024:.1f} MiB after {n}")
sys.exit(1 if state["bad"] or state["done"] < total else 0)
PY
kill -TERM "$pid"
if ! wait "$pid"; then
    echo "soak: the daemon did not exit 0 after SIGTERM; see $OUT/daemon.log" >&2
    status=1
fi
exit $status
