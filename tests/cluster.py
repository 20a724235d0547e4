#!/usr/bin/env python3
"""tests/cluster.py DAEMON MODEL_DIR - a cluster stand-in on loopback.

Real parts: Debian's haproxy running deploy/haproxy.cfg in front of three
daemons of the build tree (r1, r2, r3; health checks on /health/ready,
retries only when no byte of an answer came, redispatch), and Prometheus
scraping the three with the relabelling of
deploy/k8s/extras/prometheus-scrape.yaml (the pods' __meta_* labels given
by static targets), so that the series carry `namespace` and `pod` as in
a cluster. The autoscaler is the HPA's formula on the answer of the
running Prometheus to prometheus-adapter's metricsQuery
(deploy/k8s/extras/prometheus-adapter-values.yaml), with the target and
bounds of deploy/k8s/components/scaling:

    desired = clamp(ceil(current * average / target), min, max)
    (no change within the HPA's 10 % tolerance)

Phases, under 32 clients sending mixed short and long texts through
haproxy (every answer compared with a single daemon's, text by text):

  scale      each request 32 texts: the desired count must rise above 3
  baseline   no fault
  sigterm    r1 (--drain-delay-s 2: unready, still serving, then the
             drain) exits 0, is started again, back behind haproxy
  sigkill    r2 killed, started again once haproxy saw it down (as a
             supervisor's restart delay)
  reload     r3 reloads its model three times (POST /v1/models/NAME/reload)
  rolling    r1, r2, r3 in turn: SIGTERM, started on a new copy of the
             model, back only once haproxy's check says it is ready
  download   /translate_file through haproxy, its link fetched through
             haproxy (routed to the replica named in it)
  idle       no load: the desired count must fall to the minimum

Zero failed requests and zero answers unlike the single daemon's in every
phase; the clients retry only when they could not reach haproxy at all
(counted, expected 0). Numbers per phase (requests, haproxy's retries and
redispatches, p50/p99) are printed, and written as JSON to $CLUSTER_REPORT
when set. No wall-clock time is asserted: the waits are bounded counts of
polls that fail the test when exhausted.

Exit 77 (ctest: skipped) without haproxy, prometheus or PyYAML. Every
process started here (tests/harness.py's spawn: its own process group,
setpriv --pdeathsig) dies with this one and is killed on every way out."""
import http.client
import json
import math
import os
import random
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import harness
from harness import check

harness.print_passes = False  # each check's message says what failed

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLIENTS = 32
PODS = ["r1", "r2", "r3"]
NAMESPACE = "default"
# SIGTERM: unready but serving this long, more than haproxy's check interval
# x fall (deploy/haproxy.cfg: 500 ms x 1), as deploy/README.md says
DRAIN_DELAY_S = 2

try:
    import yaml
except ImportError:
    print("cluster: no PyYAML (python3-yaml): skipped")
    sys.exit(77)

def say(*a):
    print("cluster:", *a, flush=True)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def req(port, method, path, body=None, headers=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def poll(what, fn, tries, pause=0.2):
    """fn() until truthy, at most tries times; fails the test when it
    never is (a count of polls, not a time)."""
    for _ in range(tries):
        v = fn()
        if v:
            return v
        time.sleep(pause)
    check(False, "gave up waiting for " + what)
    raise SystemExit(finish())


# ---------------------------------------------------------------------------
# processes

class Daemon:
    def __init__(self, exe, name, port, tmp):
        self.exe, self.name, self.port, self.tmp = exe, name, port, tmp
        self.proc = None
        self.starts = 0

    def start(self, model_dir):
        self.starts += 1
        log = open(os.path.join(self.tmp, "%s.%d.log" % (self.name, self.starts)), "wb")
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        self.proc = harness.spawn([self.exe, "serve", "--host", "127.0.0.1", "--port", str(self.port),
                                   "--model", "marian_en_de=" + model_dir, "--replica-id", self.name,
                                   "--workers", "1", "--threads", "1", "--http-threads", "8",
                                   "--drain-delay-s", str(DRAIN_DELAY_S), "--cache-bytes", "0",
                                   "--max-connections-per-ip", "0",
                                   "--log-format", "json"], log, log, env)

    def ready(self):
        try:
            return req(self.port, "GET", "/health/ready", timeout=5)[0] == 200
        except OSError:
            return False


class Haproxy:
    def __init__(self, tmp, port, daemons):
        self.sock = os.path.join(tmp, "haproxy.sock")
        env = dict(os.environ, TD_LISTEN="127.0.0.1:%d" % port, TD_ADMIN_SOCKET=self.sock)
        for d in daemons:
            env["TD_" + d.name.upper()] = "127.0.0.1:%d" % d.port
        self.port = port
        log = open(os.path.join(tmp, "haproxy.log"), "wb")
        self.proc = harness.spawn(["haproxy", "-db", "-f", os.path.join(ROOT, "deploy", "haproxy.cfg")],
                                  log, log, env)

    def stat(self):
        """{(proxy, server): row} of `show stat`, {} when the socket is not up."""
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(self.sock)
            s.sendall(b"show stat\n")
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
            s.close()
        except OSError:
            return {}
        lines = data.decode().splitlines()
        if not lines or not lines[0].startswith("# "):
            return {}
        head = lines[0][2:].split(",")
        rows = {}
        for ln in lines[1:]:
            if ln:
                row = dict(zip(head, ln.split(",")))
                rows[(row["pxname"], row["svname"])] = row
        return rows

    def up(self, name):
        return self.stat().get(("transformerd", name), {}).get("status") == "UP"

    def down(self, name):
        return self.stat().get(("transformerd", name), {}).get("status", "").startswith("DOWN")

    def counters(self):
        b = self.stat().get(("transformerd", "BACKEND"), {})
        return {k: int(b.get(k) or 0) for k in ("wretr", "wredis", "econ", "eresp")}


class Prometheus:
    def __init__(self, tmp, port, daemons):
        with open(os.path.join(ROOT, "deploy", "k8s", "extras", "prometheus-scrape.yaml")) as f:
            job = yaml.safe_load(f)["scrape_configs"][0]
        del job["kubernetes_sd_configs"]
        # the targets as kubernetes_sd would give them: the pod's address,
        # namespace, name and annotations (deployment.yaml's)
        job["static_configs"] = [{
            "targets": ["127.0.0.1:%d" % d.port],
            "labels": {"__meta_kubernetes_namespace": NAMESPACE,
                       "__meta_kubernetes_pod_name": "transformerd-" + d.name,
                       "__meta_kubernetes_pod_annotation_prometheus_io_scrape": "true",
                       "__meta_kubernetes_pod_annotation_prometheus_io_port": str(d.port),
                       "__meta_kubernetes_pod_annotation_prometheus_io_path": "/metrics"}}
            for d in daemons]
        job["scrape_interval"] = "1s"
        job["scrape_timeout"] = "1s"
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            yaml.safe_dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                            "scrape_configs": [job]}, f)
        self.port = port
        log = open(os.path.join(tmp, "prometheus.log"), "wb")
        self.proc = harness.spawn(["prometheus", "--config.file=" + cfg,
                                   "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                                   "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
                                  log, log)

    def ready(self):
        try:
            return req(self.port, "GET", "/-/ready", timeout=5)[0] == 200
        except OSError:
            return False

    def query(self, q):
        st, body = req(self.port, "GET", "/api/v1/query?" + urllib.parse.urlencode({"query": q}))
        j = json.loads(body)
        if st != 200 or j.get("status") != "success":
            raise RuntimeError("prometheus: %s: %s" % (q, body[:300]))
        return j["data"]["result"]


# ---------------------------------------------------------------------------
# the autoscaler

def scaling_numbers():
    """(min, max, target, the adapter's metricsQuery rendered for the pods)."""
    with open(os.path.join(ROOT, "deploy", "k8s", "components", "scaling", "kustomization.yaml")) as f:
        comp = yaml.safe_load(f)
    lo = hi = target = None
    for pt in comp["patches"]:
        body = yaml.safe_load(pt["patch"])
        if body["kind"] == "HorizontalPodAutoscaler":
            lo, hi = body["spec"]["minReplicas"], body["spec"]["maxReplicas"]
            for m in body["spec"]["metrics"]:
                if m["type"] == "Pods":
                    target = float(m["pods"]["target"]["averageValue"])
    with open(os.path.join(ROOT, "deploy", "k8s", "extras", "prometheus-adapter-values.yaml")) as f:
        rule = yaml.safe_load(f)["rules"]["custom"][0]
    series = rule["seriesQuery"].split("{")[0]
    matchers = 'namespace="%s",pod=~"%s"' % (NAMESPACE, "|".join("transformerd-" + p for p in PODS))
    q = (rule["metricsQuery"].replace("<<.Series>>", series).replace("<<.LabelMatchers>>", matchers)
         .replace("<<.GroupBy>>", "pod"))
    return lo, hi, target, q


def desired(prom, numbers, current):
    """The HPA's proposal from the series Prometheus has now: (desired,
    per-pod values)."""
    lo, hi, target, q = numbers
    per_pod = {r["metric"].get("pod"): float(r["value"][1]) for r in prom.query(q)}
    if not per_pod:
        return None, per_pod
    avg = sum(per_pod.values()) / len(per_pod)
    ratio = avg / target
    want = current if abs(ratio - 1.0) <= 0.1 else math.ceil(current * ratio)
    return max(lo, min(hi, want)), per_pod


# ---------------------------------------------------------------------------
# the clients

SHORT = ["Hello.", "Thank you.", "Good morning.", "Where is the station?", "I like tea.",
         "The cat sleeps.", "Open the door.", "See you tomorrow."]
LONG = ["The committee will meet again next week to discuss the budget for the coming year, "
        "and every member is asked to send their proposals before Friday.",
        "When the train finally arrived at the small station in the mountains, the travellers "
        "were tired, hungry and glad that the long journey was over.",
        "Please read the instructions carefully before you install the software, because some "
        "of the settings cannot be changed later without losing your data.",
        "The museum, which opened in the old harbour building last spring, shows paintings, "
        "maps and ships' models from three centuries of the city's history."]
TEXTS = SHORT + LONG


class Load:
    """32 client threads sending POST /v1/translate through haproxy, each
    answer checked against the single daemon's translations."""

    def __init__(self, port, reference):
        self.port, self.ref = port, reference
        self.phase = "none"
        self.texts_per_request = (1, 2)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.records = []  # (phase, seconds, ok, why)
        self.client_retries = 0
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(CLIENTS)]

    def start(self):
        for t in self.threads:
            t.start()

    def done(self, phase):
        with self.lock:
            return sum(1 for r in self.records if r[0] == phase)

    def run(self, i):
        rng = random.Random(i)
        conn = None
        while not self.stop.is_set():
            phase = self.phase
            lo, hi = self.texts_per_request
            texts = [rng.choice(TEXTS) for _ in range(rng.randint(lo, hi))]
            body = json.dumps({"text": texts}).encode()
            t0 = time.monotonic()
            ok, why = False, ""
            for attempt in range(3):
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
                        conn.connect()
                except OSError as e:
                    # haproxy itself unreachable: the request never left
                    conn = None
                    with self.lock:
                        self.client_retries += 1
                    why = "connect: %s" % e
                    continue
                try:
                    conn.request("POST", "/v1/translate", body, {"Content-Type": "application/json"})
                    r = conn.getresponse()
                    data = r.read()
                    if r.getheader("Connection", "").lower() == "close":
                        conn.close()
                        conn = None
                except (OSError, http.client.HTTPException) as e:
                    conn = None
                    why = "%s: %s" % (type(e).__name__, e)
                    break
                if r.status != 200:
                    why = "HTTP %d %s" % (r.status, data[:200])
                    break
                got = [t.get("text") for t in json.loads(data).get("translations", [])]
                want = [self.ref[t] for t in texts]
                ok = got == want
                why = "" if ok else "answer differs from the single daemon's: %r != %r" % (got, want)
                break
            with self.lock:
                self.records.append((phase, time.monotonic() - t0, ok, why))


def wait_requests(load, phase, n, tries=3000):
    poll("%d answers in phase %s" % (n, phase), lambda: load.done(phase) >= n, tries, 0.05)


def pct(xs, q):
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(math.ceil(q * len(xs))) - 1)]


# ---------------------------------------------------------------------------

REPORT = {"phases": [], "scaling": {}}
TMP = None


def finish():
    harness.end_all()
    if os.environ.get("CLUSTER_REPORT"):
        with open(os.environ["CLUSTER_REPORT"], "w") as f:
            json.dump(REPORT, f, indent=1)
    if TMP and harness.failed == 0:
        shutil.rmtree(TMP, ignore_errors=True)
    elif TMP:
        say("logs kept in", TMP)
    return harness.finish()


def main():
    global TMP
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    for tool in ("haproxy", "prometheus", "setpriv"):
        if not shutil.which(tool):
            print("cluster: %s is not installed: skipped (tools/bootstrap.sh --with-browser installs it)" % tool)
            return 77
    exe, model = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    TMP = tempfile.mkdtemp(prefix="td-cluster-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(finish()))
    ports = free_ports(len(PODS) + 2)
    daemons = [Daemon(exe, name, ports[i], TMP) for i, name in enumerate(PODS)]
    for d in daemons:
        d.start(model)
    poll("the daemons' readiness", lambda: all(d.ready() for d in daemons), 600)

    # the single daemon's answers, each text alone, before any load
    ref = {}
    for t in TEXTS:
        st, body = req(daemons[0].port, "POST", "/v1/translate", json.dumps({"text": [t]}).encode(),
                        {"Content-Type": "application/json"})
        check(st == 200, "reference translation: %d" % st)
        ref[t] = json.loads(body)["translations"][0]["text"]
    check(len(set(ref.values())) > 1, "the reference translations are all alike")

    hap = Haproxy(TMP, ports[-2], daemons)
    prom = Prometheus(TMP, ports[-1], daemons)
    poll("haproxy's checks", lambda: all(hap.up(d.name) for d in daemons), 300)
    poll("Prometheus", prom.ready, 300)
    numbers = scaling_numbers()
    lo, hi, target, query = numbers
    say("HPA: min %d, max %d, target %g per pod; adapter query: %s" % (lo, hi, target, query))

    # the series are labelled as a cluster's
    def labelled():
        res = prom.query('transformerd_ready{namespace="%s"}' % NAMESPACE)
        return {r["metric"].get("pod") for r in res} == {"transformerd-" + p for p in PODS}
    poll("the three pods' series with namespace and pod labels", labelled, 100)
    check(True, "series labelled namespace/pod")
    idle0, per_pod = poll("the adapter's query", lambda: (lambda d: d if d[0] is not None else None)(
        desired(prom, numbers, len(PODS))), 100)
    check(idle0 == lo, "idle at the start: desired %s, want the minimum %d (per pod %s)" % (idle0, lo, per_pod))
    REPORT["scaling"]["idle_start"] = {"desired": idle0, "per_pod": per_pod}

    load = Load(hap.port, ref)

    def phase(name, texts=(1, 2)):
        load.texts_per_request = texts
        load.phase = name
        return hap.counters()

    def close_phase(name, before):
        after = hap.counters()
        with load.lock:
            recs = [r for r in load.records if r[0] == name]
        bad = [r for r in recs if not r[2]]
        lat = [r[1] for r in recs]
        row = {"phase": name, "requests": len(recs), "failed": len(bad),
               "haproxy_retries": after["wretr"] - before["wretr"],
               "haproxy_redispatches": after["wredis"] - before["wredis"],
               "p50_ms": round(1e3 * pct(lat, 0.5), 1), "p99_ms": round(1e3 * pct(lat, 0.99), 1)}
        REPORT["phases"].append(row)
        say("%-9s %5d requests, %d failed, haproxy retries %d, redispatches %d, p50 %.1f ms, p99 %.1f ms"
            % (name, row["requests"], row["failed"], row["haproxy_retries"], row["haproxy_redispatches"],
               row["p50_ms"], row["p99_ms"]))
        check(recs, "phase %s: no request answered" % name)
        check(not bad, "phase %s: %d of %d requests failed, e.g. %s" % (name, len(bad), len(recs),
                                                                        bad[0][3] if bad else ""))

    # --- scale: a load over what one replica takes
    before = phase("scale", (32, 32))
    load.start()
    wait_requests(load, "scale", 2 * CLIENTS)

    def risen():
        d, pp = desired(prom, numbers, len(PODS))
        return (d, pp) if d is not None and d > len(PODS) else None
    up, per_pod = poll("the desired count to rise above %d" % len(PODS), risen, 300, 0.5)
    REPORT["scaling"]["loaded"] = {"desired": up, "per_pod": per_pod}
    say("under load: desired %d (current %d), per pod %s" % (up, len(PODS), per_pod))
    check(up > len(PODS), "under load the desired count rises")
    close_phase("scale", before)

    # --- faults under the normal load (1 or 2 texts a request)
    before = phase("baseline")
    wait_requests(load, "baseline", 200)
    close_phase("baseline", before)

    def back(d):
        poll("%s ready" % d.name, d.ready, 600)
        poll("%s UP in haproxy" % d.name, lambda: hap.up(d.name), 300)

    before = phase("sigterm")
    wait_requests(load, "sigterm", 50)
    r1 = daemons[0]
    r1.proc.send_signal(signal.SIGTERM)
    rc = r1.proc.wait(120)
    check(rc == 0, "r1 after SIGTERM: exit %s, want 0" % rc)
    r1.start(model)
    back(r1)
    wait_requests(load, "sigterm", load.done("sigterm") + 100)
    close_phase("sigterm", before)

    before = phase("sigkill")
    wait_requests(load, "sigkill", 50)
    r2 = daemons[1]
    # what r2 holds when it dies: haproxy retries these (no byte of an
    # answer came: empty-response), besides the connections refused after
    in_flight = int(hap.stat().get(("transformerd", "r2"), {}).get("scur") or 0)
    REPORT["sigkill_in_flight"] = in_flight
    say("SIGKILL r2 with %d requests in flight on it" % in_flight)
    r2.proc.kill()
    r2.proc.wait()
    # a supervisor restarts it after haproxy saw it gone (systemd's
    # RestartSec=5, Kubernetes' back-off: longer than a check)
    poll("haproxy to mark r2 down", lambda: hap.down("r2"), 300)
    r2.start(model)
    back(r2)
    wait_requests(load, "sigkill", load.done("sigkill") + 100)
    close_phase("sigkill", before)

    before = phase("reload")
    r3 = daemons[2]
    for _ in range(3):
        wait_requests(load, "reload", load.done("reload") + 30)
        st, body = req(r3.port, "POST", "/v1/models/marian_en_de/reload", b"", timeout=300)
        check(st == 200, "r3 reload: %d %s" % (st, body[:200]))
        check(hap.up("r3"), "r3 left haproxy's rotation during a reload")
    wait_requests(load, "reload", load.done("reload") + 50)
    close_phase("reload", before)

    # --- rolling update: a new copy of the model, one replica at a time
    v2 = os.path.join(TMP, "v2", "marian_en_de")
    shutil.copytree(model, v2)
    before = phase("rolling")
    for d in daemons:
        wait_requests(load, "rolling", load.done("rolling") + 30)
        d.proc.send_signal(signal.SIGTERM)
        rc = d.proc.wait(120)
        check(rc == 0, "%s after SIGTERM: exit %s" % (d.name, rc))
        d.start(v2)
        back(d)  # readiness gated: the next only once this one serves
    wait_requests(load, "rolling", load.done("rolling") + 50)
    close_phase("rolling", before)

    load.stop.set()
    for t in load.threads:
        t.join(300)
    check(load.client_retries == 0, "clients could not reach haproxy %d times" % load.client_retries)
    REPORT["client_retries"] = load.client_retries

    # --- a download through the balancer reaches the replica holding it
    boundary = "td-cluster-b"
    body = ("--%s\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nen\r\n"
            "--%s\r\nContent-Disposition: form-data; name=\"target\"\r\n\r\nde\r\n"
            "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"
            "Content-Type: text/plain\r\n\r\nHello.\n\r\n--%s--\r\n" % ((boundary,) * 4)).encode()
    held = set()
    for _ in range(6):
        st, data = req(hap.port, "POST", "/translate_file", body,
                        {"Content-Type": "multipart/form-data; boundary=" + boundary})
        if not check(st == 200, "/translate_file through haproxy: %d %s" % (st, data[:200])):
            continue
        path = urllib.parse.urlsplit(json.loads(data)["translatedFileUrl"]).path
        held.add(path.split("/")[2])
        for _ in range(3):
            st, got = req(hap.port, "GET", path)
            check(st == 200 and got.strip() == ref["Hello."].encode(),
                  "download %s through haproxy: %d %r" % (path, st, got[:100]))
    check(len(held) >= 2, "the uploads all went to one replica (%s): routing not exercised" % held)
    REPORT["download_replicas"] = sorted(held)

    # --- idle: the adapter's minute-long average empties, the count falls
    def fallen():
        d, pp = desired(prom, numbers, len(PODS))
        return (d, pp) if d == lo else None
    down, per_pod = poll("the desired count to fall to %d" % lo, fallen, 400, 0.5)
    REPORT["scaling"]["idle_end"] = {"desired": down, "per_pod": per_pod}
    say("idle: desired %d, per pod %s" % (down, per_pod))
    check(down == lo, "idle, the desired count falls")
    return finish()


if __name__ == "__main__":
    try:
        rc = main()
    except SystemExit:
        raise
    except BaseException:
        import traceback
        traceback.print_exc()
        harness.failed += 1
        rc = finish()
    sys.exit(rc)
