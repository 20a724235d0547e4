#!/usr/bin/env python3
"""Offline checks of the deployment files (no Docker engine, no cluster).

    tools/check_deploy.py [--root DIR] [--hadolint PATH] [--yamllint PATH] [--self-test]

Parses Dockerfile, .dockerignore, deploy/docker-compose.yml, deploy/k8s/**.yaml
and deploy/systemd/transformerd.service (YAML with PyYAML) and checks the
fields that the deployment contract needs (deploy/README.md): a CUDA
devel -> runtime build of the toolkit's major version, the bootstrap script,
a non-root user, EXPOSE 8080, a HEALTHCHECK on /health/ready, exec-form
ENTRYPOINT with STOPSIGNAL SIGTERM, TRANSFORMERD_* configuration, the GPU
reservation, probes on /health/*, grace periods longer than the drain
deadline (read from server/serve.c), a hardened systemd unit, every
bundled model served by default (TRANSFORMERD_MODELS_DIR=/opt/transformerd/models
in the images, compose, Kubernetes and systemd), and so on.
Each failed check prints one line naming the file and the field.

With --daemon BUILD/transformerd the unit is also parsed by systemd-analyze
verify (where installed), and the daemon is started with the CPU image's
ENV (its models directory mapped to the repository's models/, a loopback
port): it must serve every model under models/ and nothing else; with an
empty models directory (an image built without models/) it must exit 2 at
start-up; with TRANSFORMERD_MODELS_DIR= and TRANSFORMERD_MODEL=DIR (the
documented one-model override) it must serve exactly that model.

With --hadolint / --yamllint (or those tools on PATH) the Dockerfile is also
linted by hadolint and the YAML files by yamllint; without them those two
steps are reported as skipped (tools/check_deploy.sh installs both).

--self-test deletes or breaks one required field at a time, in memory, and
fails unless every such mutation is reported: the checker is shown to fail.

Exit status: 0 all passed, 1 a check failed, 77 PyYAML is missing (ctest skip).
"""
import argparse
import fnmatch
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

try:
    import yaml
except ImportError:  # pragma: no cover - reported, then ctest skips
    print("check_deploy: PyYAML is not installed (apt-get install python3-yaml, "
          "or run tools/check_deploy.sh, which makes a venv with it)", file=sys.stderr)
    sys.exit(77)

# Files read, relative to the repository root.
DOCKERFILE = "Dockerfile"
DOCKERIGNORE = ".dockerignore"
COMPOSE = "deploy/docker-compose.yml"
K8S_GLOB = "deploy/k8s/*.yaml"
K8S_EXTRAS_GLOB = "deploy/k8s/extras/*.yaml"
K8S_COMPONENTS_GLOB = "deploy/k8s/components/*/*.yaml"
K8S_OVERLAYS_GLOB = "deploy/k8s/overlays/*/kustomization.yaml"
QUEUE_HPA = "deploy/k8s/components/queue-hpa/hpa-queue-depth.yaml"
SCALING = "deploy/k8s/components/scaling/kustomization.yaml"
ADAPTER_VALUES = "deploy/k8s/extras/prometheus-adapter-values.yaml"
HAPROXY = "deploy/haproxy.cfg"
SCHEMA_DIR = "tests/data/k8s-schemas"
KEDA_SCHEMA = SCHEMA_DIR + "/keda-scaledobject.schema.json"
ADAPTER_SCHEMA = SCHEMA_DIR + "/prometheus-adapter-rule.schema.json"
# The Kubernetes version kubernetes-validate checks against (its bundled
# OpenAPI schemas): the oldest the manifests support.
K8S_VERSION = "1.33.0"
UNIT = "deploy/systemd/transformerd.service"
UNIT_ENV = "deploy/systemd/transformerd.env"
DEPLOY_README = "deploy/README.md"
SERVE_C = "server/serve.c"
METRICS_C = "server/service/metrics.c"

# Where the images put the build context's models/; the deployment files
# serve every model directory in it (TRANSFORMERD_MODELS_DIR), as `make run`
# serves models/.
MODELS_DIR = "/opt/transformerd/models"
PORT = 8080
# Runtime packages a runtime stage may install (Debian 12 and Ubuntu 24.04
# names): the daemon's shared libraries, curl for the HEALTHCHECK.
RUNTIME_PKG = re.compile(r"^(libmicrohttpd\d+(t64)?|libjansson4|libopenblas0(-pthread|-openmp|-serial)?"
                         r"|libxml2|libexttextcat-2\.0-0|libexttextcat-data|libicu\d+"
                         r"|curl|ca-certificates)$")
RUNTIME_NEEDS = {"libmicrohttpd": r"^libmicrohttpd", "jansson": r"^libjansson",
                 "OpenBLAS": r"^libopenblas", "libxml2": r"^libxml2$",
                 "libexttextcat": r"^libexttextcat-2\.0-0$",
                 "libexttextcat's fingerprints": r"^libexttextcat-data$", "ICU": r"^libicu\d+$",
                 "curl": r"^curl$"}


class Report:
    def __init__(self):
        self.errors = []
        self.passed = 0

    def check(self, ok, where, msg):
        if ok:
            self.passed += 1
        else:
            self.errors.append("%s: %s" % (where, msg))
        return ok


def check_models_env(rep, env, where):
    """The default models of a deployment: every directory under MODELS_DIR,
    no single model pinned besides (env: name -> value; None = unset)."""
    rep.check(env.get("TRANSFORMERD_MODELS_DIR") == MODELS_DIR, where,
              "TRANSFORMERD_MODELS_DIR=%s (serve every bundled model) missing (got %r)"
              % (MODELS_DIR, env.get("TRANSFORMERD_MODELS_DIR")))
    rep.check(not env.get("TRANSFORMERD_MODEL"), where,
              "TRANSFORMERD_MODEL=%s pins a model besides TRANSFORMERD_MODELS_DIR's (leave it unset)"
              % env.get("TRANSFORMERD_MODEL"))


# --------------------------------------------------------------------------
# server/serve.c: the drain deadline the configurations must outlast.

def serve_timing(files):
    """(default --drain-timeout-s, seconds after the drain to write responses)."""
    src = files.get(SERVE_C, "")
    m = re.search(r"o->drain_timeout_s\s*=\s*(\d+)\s*;", src)
    drain = int(m.group(1)) if m else 30
    m = re.search(r"double until = srv_now\(\) \+ (\d+)", src)
    write = int(m.group(1)) if m else 5
    return drain, write


def nvcc_major():
    """The CUDA major version of the local toolkit, or None without nvcc."""
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.", out)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------
# Dockerfile

def parse_dockerfile(text):
    """Stages [{name, base, instrs: [(INSTR, args, line)]}] and global ARGs."""
    logical, buf, start = [], "", None
    for i, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if s.startswith("#") or (not buf and not s):
            continue
        if start is None:
            start = i
        if s.endswith("\\"):
            buf += s[:-1] + " "
            continue
        logical.append((start, buf + s))
        buf, start = "", None
    if buf:
        logical.append((start, buf))
    gargs, stages = {}, []
    for line, ins in logical:
        word, _, args = ins.partition(" ")
        word, args = word.upper(), args.strip()
        if word == "FROM":
            m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", args, re.I)
            base = m.group(1) if m else args
            base = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda x: gargs.get(x.group(1) or x.group(2), ""), base)
            stages.append({"name": (m.group(2) or "").lower() if m else "", "base": base,
                           "line": line, "instrs": []})
        elif not stages:
            if word == "ARG":
                k, _, v = args.partition("=")
                gargs[k.strip()] = v.strip().strip('"')
        else:
            stages[-1]["instrs"].append((word, args, line))
    return stages, gargs


def instrs(stage, word):
    return [(a, ln) for w, a, ln in stage["instrs"] if w == word]


def env_of(stage):
    env = {}
    for args, _ in instrs(stage, "ENV"):
        try:
            parts = shlex.split(args)
        except ValueError:
            continue
        if parts and "=" not in parts[0] and len(parts) >= 2:
            env[parts[0]] = " ".join(parts[1:])
        else:
            for p in parts:
                k, _, v = p.partition("=")
                env[k] = v
    return env


def apt_packages(stage):
    pkgs = []
    for args, _ in instrs(stage, "RUN"):
        for m in re.finditer(r"apt-get\s+install\s+([^&;|]*)", args):
            pkgs += [p for p in m.group(1).split() if not p.startswith("-")]
    return pkgs


def check_runtime_stage(rep, st, build_name, device, where):
    w = "%s stage '%s'" % (where, st["name"])
    users = instrs(st, "USER")
    user = users[-1][0].split(":")[0] if users else ""
    rep.check(users and user not in ("", "root", "0"), w, "USER must be set to a non-root user (got %r)" % user)
    exposed = " ".join(a for a, _ in instrs(st, "EXPOSE")).split()
    rep.check(str(PORT) in [p.split("/")[0] for p in exposed], w, "EXPOSE %d missing" % PORT)
    hc = instrs(st, "HEALTHCHECK")
    rep.check(hc and "/health/ready" in hc[-1][0] and "CMD" in hc[-1][0], w,
              "HEALTHCHECK with CMD on /health/ready missing")
    ss = instrs(st, "STOPSIGNAL")
    rep.check(ss and ss[-1][0].strip() in ("SIGTERM", "15", "TERM"), w, "STOPSIGNAL SIGTERM missing")
    ep = instrs(st, "ENTRYPOINT")
    exec_form = False
    if ep:
        try:
            v = json.loads(ep[-1][0])
            exec_form = isinstance(v, list) and "serve" in v and v[0].endswith("transformerd")
        except ValueError:
            pass
    rep.check(exec_form, w, 'ENTRYPOINT must be exec form ["/.../transformerd", "serve"] '
              "(shell form would not pass SIGTERM to the daemon)")
    env = env_of(st)
    check_models_env(rep, env, w + " ENV")
    rep.check(env.get("TRANSFORMERD_HOST") == "0.0.0.0", w,
              "ENV TRANSFORMERD_HOST=0.0.0.0 missing (the default 127.0.0.1 is unreachable from outside)")
    rep.check(env.get("TRANSFORMERD_DEVICE") == device, w, "ENV TRANSFORMERD_DEVICE=%s missing" % device)
    bad_env = [k for k in env if k.startswith("TD_") or (k.startswith("TRANSFORMER") and not k.startswith("TRANSFORMERD_"))]
    rep.check(not bad_env, w, "configuration goes through TRANSFORMERD_* (got %s)" % bad_env)
    copies = [a for a, _ in instrs(st, "COPY")]
    rep.check(any(("--from=%s" % build_name) in c and "transformerd" in c for c in copies), w,
              "COPY --from=%s of the transformerd binary missing" % build_name)
    rep.check(any(("--from=%s" % build_name) in c and "models" in c and MODELS_DIR in c
                  for c in copies), w, "COPY --from=%s of models/ to %s missing" % (build_name, MODELS_DIR))
    runs = " ".join(a for a, _ in instrs(st, "RUN"))
    vols = " ".join(a for a, _ in instrs(st, "VOLUME"))
    rep.check(re.search(r"mkdir[^&;]*\s/models(\s|$)", runs) or "/models" in vols, w,
              "/models (the mount point for mounted models) is not created")
    pkgs = apt_packages(st)
    extra = [p for p in pkgs if not RUNTIME_PKG.match(p)]
    rep.check(not extra, w, "runtime stage installs more than the runtime libraries: %s" % extra)
    for lib, rx in RUNTIME_NEEDS.items():
        rep.check(any(re.match(rx, p) for p in pkgs), w, "runtime library %s is not installed" % lib)
    rep.check(not any(w2 == "ADD" and re.search(r"https?://", a) for w2, a, _ in st["instrs"]),
              w, "ADD of a URL (unverified download)")


def check_build_stage(rep, st, cuda_flag, where):
    w = "%s stage '%s'" % (where, st["name"])
    runs = [a for a, _ in instrs(st, "RUN")]
    rep.check(any(re.search(r"(^|\s|/)tools/bootstrap\.sh", r) for r in runs), w,
              "must install its dependencies with tools/bootstrap.sh (the README's script)")
    cm = [r for r in runs if re.search(r"\bcmake\b", r)]
    rep.check(any("-DCMAKE_BUILD_TYPE=Release" in r for r in cm), w, "cmake -DCMAKE_BUILD_TYPE=Release missing")
    rep.check(any(("-DTD_CUDA=%s" % cuda_flag) in r for r in cm), w, "cmake -DTD_CUDA=%s missing" % cuda_flag)


def check_dockerfile(rep, files, cuda_major):
    text = files.get(DOCKERFILE)
    if not rep.check(text is not None, DOCKERFILE, "missing"):
        return
    stages, _ = parse_dockerfile(text)
    by_name = {s["name"]: s for s in stages}
    cuda = re.compile(r"^(?:nvcr\.io/)?nvidia/cuda:(\d+)\.(\d+)\.(\d+)-(devel|runtime)-(\S+)$")
    devel = [s for s in stages if cuda.match(s["base"]) and cuda.match(s["base"]).group(4) == "devel"]
    runtime = [s for s in stages if cuda.match(s["base"]) and cuda.match(s["base"]).group(4) == "runtime"]
    if rep.check(devel, DOCKERFILE, "no build stage FROM nvidia/cuda:X.Y.Z-devel-OS"):
        check_build_stage(rep, devel[0], "ON", DOCKERFILE)
    if rep.check(runtime, DOCKERFILE, "no runtime stage FROM nvidia/cuda:X.Y.Z-runtime-OS"):
        d = cuda.match(devel[0]["base"]) if devel else None
        r = cuda.match(runtime[0]["base"])
        if d:
            rep.check(d.group(1, 2, 3, 5) == r.group(1, 2, 3, 5), DOCKERFILE,
                      "runtime image %s does not match the devel image %s" % (runtime[0]["base"], devel[0]["base"]))
        if cuda_major is not None:
            rep.check(int(r.group(1)) == cuda_major, DOCKERFILE,
                      "CUDA %s in the images, but the toolkit here (nvcc) is CUDA %d" % (r.group(1), cuda_major))
        rep.check(stages[-1] is runtime[0], DOCKERFILE,
                  "the GPU runtime stage must be the last one (the default `docker build` target)")
        if devel:
            check_runtime_stage(rep, runtime[0], devel[0]["name"], "cuda", DOCKERFILE)
    cpu = by_name.get("cpu")
    if rep.check(cpu is not None, DOCKERFILE, "no stage named 'cpu' (docker build --target cpu)"):
        rep.check(re.match(r"^debian:(12|bookworm)(\.\d+)?-slim$", cpu["base"]), DOCKERFILE,
                  "stage 'cpu' must be FROM debian:12-slim (got %s)" % cpu["base"])
        src = [re.search(r"--from=(\S+)", a) for a, _ in instrs(cpu, "COPY")]
        names = [m.group(1).lower() for m in src if m]
        bst = by_name.get(names[0]) if names else None
        if rep.check(bst is not None, DOCKERFILE, "stage 'cpu' copies from no build stage"):
            check_build_stage(rep, bst, "OFF", DOCKERFILE)
            check_runtime_stage(rep, cpu, bst["name"], "cpu", DOCKERFILE)


def dockerignore_excludes(patterns, path):
    """Whether .dockerignore's patterns exclude PATH (last match wins)."""
    def rx(p):
        out, i = "", 0
        while i < len(p):
            if p.startswith("**/", i):
                out += "(?:.*/)?"
                i += 3
            elif p.startswith("**", i):
                out += ".*"
                i += 2
            elif p[i] == "*":
                out += "[^/]*"
                i += 1
            elif p[i] == "?":
                out += "[^/]"
                i += 1
            else:
                out += re.escape(p[i])
                i += 1
        return re.compile(out + "$")
    parts = path.split("/")
    excluded = False
    for raw in patterns:
        neg = raw.startswith("!")
        p = raw[1:] if neg else raw
        p = p.strip("/")
        r = rx(p)
        if any(r.match("/".join(parts[:k])) for k in range(1, len(parts) + 1)):
            excluded = not neg
    return excluded


def check_dockerignore(rep, files):
    text = files.get(DOCKERIGNORE)
    if not rep.check(text is not None, DOCKERIGNORE, "missing"):
        return
    pats = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    for p in (".git/HEAD", "build/transformerd", "build-asan/x", "tools/.venv/bin/python",
              "tools/__pycache__/x.pyc"):
        rep.check(dockerignore_excludes(pats, p), DOCKERIGNORE, "does not exclude %s" % p)
    for p in ("models/en-de/config.json", "models/de-en/model.safetensors", "tools/bootstrap.sh", "CMakeLists.txt", "server/serve.c",
              "model/config.c", "backend/backend.h", "tokenizer/spm.c", "cpu/cpu_backend.c", "gpu/gpu_backend.cu", "gpu/CMakeLists.txt"):
        rep.check(not dockerignore_excludes(pats, p), DOCKERIGNORE, "excludes %s, which the build needs" % p)


# --------------------------------------------------------------------------
# docker compose

def seconds(v):
    """Compose/Go durations ("45s", "1m30s", 90) to seconds; None if unreadable."""
    if isinstance(v, (int, float)):
        return float(v)
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?", str(v).strip())
    if not m or not any(m.groups()):
        return None
    h, mi, s, ms = (int(x) if x else 0 for x in m.groups())
    return h * 3600 + mi * 60 + s + ms / 1000.0


def interp(v):
    """Compose interpolation with the defaults: ${X:-d} / ${X-d} -> d."""
    return re.sub(r"\$\{\w+:?-([^}]*)\}", r"\1", str(v)) if v is not None else v


def compose_env(svc):
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.partition("=")[::2] for e in env)
    return {k: interp(v) for k, v in env.items()}


def check_compose(rep, files, drain_default, write_s):
    text = files.get(COMPOSE)
    if not rep.check(text is not None, COMPOSE, "missing"):
        return
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        rep.check(False, COMPOSE, "YAML: %s" % e)
        return
    svcs = (doc or {}).get("services") or {}
    rep.check(svcs, COMPOSE, "no services")

    def gpu_reserved(s):
        devs = (((s.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices") or []
        return any(d.get("driver") == "nvidia" and str(d.get("count", "")) in ("1", "all")
                   and "gpu" in (d.get("capabilities") or []) for d in devs)

    gpu = [(n, s) for n, s in svcs.items() if gpu_reserved(s)]
    cpu = [(n, s) for n, s in svcs.items() if "cpu" in (s.get("profiles") or [])]
    rep.check(gpu, COMPOSE, "no service with deploy.resources.reservations.devices "
              "[{driver: nvidia, count: 1, capabilities: [gpu]}]")
    rep.check(cpu, COMPOSE, "no service in the 'cpu' profile")
    for (n, s), device, target in [(g, "cuda", "gpu") for g in gpu[:1]] + [(c, "cpu", "cpu") for c in cpu[:1]]:
        w = "%s service '%s'" % (COMPOSE, n)
        b = s.get("build") or {}
        rep.check(isinstance(b, dict) and b.get("target") == target, w, "build.target must be '%s'" % target)
        if device == "cpu":
            rep.check(not gpu_reserved(s), w, "the cpu service reserves a GPU")
        ports = [str(p.get("target")) if isinstance(p, dict) else str(p).split(":")[-1].split("/")[0]
                 for p in s.get("ports") or []]
        rep.check(str(PORT) in ports, w, "no port mapped to container port %d" % PORT)
        vols = [v.get("target") if isinstance(v, dict) else interp(v).split(":")[1]
                for v in s.get("volumes") or [] if isinstance(v, dict) or ":" in str(v)]
        rep.check("/models" in vols, w, "no volume mounted at /models")
        srcs = [str(v.get("source", "")) if isinstance(v, dict) else str(v) for v in s.get("volumes") or []]
        rep.check(not any(re.search(r"\$\{?TRANSFORMERD_", v) for v in srcs), w,
                  "a volume's host path comes from a TRANSFORMERD_* variable, which the daemon reads "
                  "as its own setting: %s" % srcs)
        hc = s.get("healthcheck") or {}
        test = hc.get("test")
        test = " ".join(test) if isinstance(test, list) else str(test or "")
        rep.check("/health/ready" in test and not hc.get("disable"), w, "healthcheck on /health/ready missing")
        env = compose_env(s)
        rep.check(all(k.startswith("TRANSFORMERD_") for k in env), w,
                  "environment other than TRANSFORMERD_*: %s" % [k for k in env if not k.startswith("TRANSFORMERD_")])
        rep.check(env.get("TRANSFORMERD_DEVICE") == device, w, "TRANSFORMERD_DEVICE=%s missing" % device)
        rep.check(env.get("TRANSFORMERD_HOST") == "0.0.0.0", w, "TRANSFORMERD_HOST=0.0.0.0 missing")
        check_models_env(rep, env, w + " environment")
        drain = int(env.get("TRANSFORMERD_DRAIN_TIMEOUT_S", drain_default))
        grace = seconds(s.get("stop_grace_period", "10s"))
        rep.check(grace is not None and grace > drain + write_s, w,
                  "stop_grace_period %s must exceed the drain deadline %d s + %d s"
                  % (s.get("stop_grace_period", "10s (default)"), drain, write_s))
        rep.check(s.get("stop_signal", "SIGTERM") == "SIGTERM", w, "stop_signal must be SIGTERM")


# --------------------------------------------------------------------------
# Kubernetes

def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def container_port(ctr, ref):
    if isinstance(ref, int) or str(ref).isdigit():
        return int(ref)
    for p in ctr.get("ports") or []:
        if p.get("name") == ref:
            return p.get("containerPort")
    return None


def check_k8s(rep, files, drain_default, write_s):
    docs = []
    for path in sorted(p for p in files if fnmatch.fnmatch(p, K8S_GLOB) or fnmatch.fnmatch(p, K8S_EXTRAS_GLOB)):
        try:
            for d in yaml.safe_load_all(files[path]):
                if d:
                    docs.append((path, d))
        except yaml.YAMLError as e:
            rep.check(False, path, "YAML: %s" % e)
    main = [(p, d) for p, d in docs if fnmatch.fnmatch(p, K8S_GLOB)]
    extras = [(p, d) for p, d in docs if fnmatch.fnmatch(p, K8S_EXTRAS_GLOB)]
    kinds = {}
    for p, d in main:
        kinds.setdefault(d.get("kind"), []).append((p, d))
    for k in ("Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"):
        rep.check(k in kinds, "deploy/k8s", "no %s" % k)
    if "Deployment" not in kinds:
        return
    path, dep = kinds["Deployment"][0]
    w = "%s Deployment" % path
    rep.check(dep.get("apiVersion") == "apps/v1", w, "apiVersion must be apps/v1")
    spec = dep.get("spec") or {}
    tmpl = spec.get("template") or {}
    pod_labels = (tmpl.get("metadata") or {}).get("labels") or {}
    rep.check(labels_match((spec.get("selector") or {}).get("matchLabels"), pod_labels), w,
              "spec.selector.matchLabels does not match the pod template's labels")
    pspec = tmpl.get("spec") or {}
    ctrs = pspec.get("containers") or []
    if not rep.check(ctrs, w, "no containers"):
        return
    ctr = ctrs[0]
    res = ctr.get("resources") or {}
    lim, req = res.get("limits") or {}, res.get("requests") or {}
    rep.check(str(lim.get("nvidia.com/gpu")) == "1", w, "resources.limits nvidia.com/gpu: 1 missing")
    rep.check("cpu" in req and "memory" in req, w, "resources.requests cpu and memory missing")
    rep.check("memory" in lim, w, "resources.limits.memory missing")
    ports = [p.get("containerPort") for p in ctr.get("ports") or []]
    rep.check(PORT in ports, w, "containerPort %d missing" % PORT)
    for probe, pth in (("readinessProbe", "/health/ready"), ("livenessProbe", "/health/live")):
        hg = (ctr.get(probe) or {}).get("httpGet") or {}
        rep.check(hg.get("path") == pth, w, "%s.httpGet.path must be %s" % (probe, pth))
        rep.check(container_port(ctr, hg.get("port")) == PORT, w, "%s port does not resolve to %d" % (probe, PORT))
    env = {e.get("name"): e.get("value") for e in ctr.get("env") or []}
    rep.check(all(str(k).startswith(("TRANSFORMERD_", "CUDA_")) for k in env), w,
              "env other than TRANSFORMERD_* / CUDA_*: %s" % [k for k in env if not str(k).startswith(("TRANSFORMERD_", "CUDA_"))])
    rep.check(env.get("TRANSFORMERD_HOST") == "0.0.0.0", w,
              "TRANSFORMERD_HOST=0.0.0.0 missing (probes and the Service reach the pod IP)")
    rep.check(env.get("TRANSFORMERD_DEVICE", "").startswith("cuda"), w, "TRANSFORMERD_DEVICE=cuda missing")
    check_k8s_models(rep, pspec, ctr, env, w)
    refs = {e.get("name"): e.get("valueFrom") or {} for e in ctr.get("env") or []}
    rep.check((refs.get("TRANSFORMERD_API_KEY") or {}).get("secretKeyRef", {}).get("name"), w,
              "TRANSFORMERD_API_KEY must come from a Secret (valueFrom.secretKeyRef)")
    rep.check(((refs.get("TRANSFORMERD_REPLICA_ID") or {}).get("fieldRef") or {}).get("fieldPath") == "metadata.name",
              w, "TRANSFORMERD_REPLICA_ID must be the pod's name (fieldRef metadata.name): the download links route by it")
    drain = int(env.get("TRANSFORMERD_DRAIN_TIMEOUT_S") or drain_default)
    pre = ((ctr.get("lifecycle") or {}).get("preStop") or {})
    sleep = 0
    cmd = (pre.get("exec") or {}).get("command") or []
    if len(cmd) == 2 and cmd[0].endswith("sleep") and str(cmd[1]).isdigit():
        sleep = int(cmd[1])
    elif "sleep" in pre:
        sleep = int((pre.get("sleep") or {}).get("seconds", 0))
    grace = pspec.get("terminationGracePeriodSeconds", 30)
    rep.check(isinstance(grace, int) and grace > sleep + drain + write_s, w,
              "terminationGracePeriodSeconds %s must exceed preStop %d s + drain %d s + %d s"
              % (grace, sleep, drain, write_s))
    sc = pspec.get("securityContext") or {}
    csc = ctr.get("securityContext") or {}
    rep.check(sc.get("runAsNonRoot") is True or csc.get("runAsNonRoot") is True, w, "runAsNonRoot: true missing")
    rep.check(csc.get("allowPrivilegeEscalation") is False, w, "allowPrivilegeEscalation: false missing")

    name = (dep.get("metadata") or {}).get("name")
    for p, svc in kinds.get("Service", []):
        w = "%s Service" % p
        s = svc.get("spec") or {}
        rep.check(labels_match(s.get("selector"), pod_labels), w, "selector does not match the Deployment's pods")
        rep.check(any(container_port(ctr, sp.get("targetPort", sp.get("port"))) == PORT for sp in s.get("ports") or []),
                  w, "no port targeting container port %d" % PORT)

    def check_hpa(p, h, want_metric):
        w = "%s HorizontalPodAutoscaler" % p
        rep.check(h.get("apiVersion") == "autoscaling/v2", w, "apiVersion must be autoscaling/v2")
        s = h.get("spec") or {}
        ref = s.get("scaleTargetRef") or {}
        rep.check(ref.get("kind") == "Deployment" and ref.get("name") == name, w,
                  "scaleTargetRef must be Deployment %s" % name)
        lo, hi = s.get("minReplicas", 1), s.get("maxReplicas", 0)
        rep.check(isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi, w, "need 1 <= minReplicas <= maxReplicas")
        ms = s.get("metrics") or []
        has_cpu = any(m.get("type") == "Resource" and (m.get("resource") or {}).get("name") == "cpu" for m in ms)
        has_q = any(m.get("type") == "Pods" and ((m.get("pods") or {}).get("metric") or {}).get("name")
                    == "transformerd_queue_depth" for m in ms)
        if want_metric == "cpu":
            rep.check(has_cpu, w, "no Resource cpu metric")
        else:
            rep.check(has_q, w, "no Pods metric transformerd_queue_depth")
        return lo

    min_rep = 1
    for p, h in kinds.get("HorizontalPodAutoscaler", []):
        min_rep = check_hpa(p, h, "cpu")
    qhpa = [(QUEUE_HPA, d) for d in yaml_docs(files.get(QUEUE_HPA, "")) if d.get("kind") == "HorizontalPodAutoscaler"]
    if rep.check(qhpa, QUEUE_HPA, "no queue-depth HorizontalPodAutoscaler"):
        check_hpa(qhpa[0][0], qhpa[0][1], "queue")
    rep.check("transformerd_queue_depth" in files.get(METRICS_C, "transformerd_queue_depth"), METRICS_C,
              "the daemon no longer exports transformerd_queue_depth, which the HPA uses")
    for p, pdb in kinds.get("PodDisruptionBudget", []):
        w = "%s PodDisruptionBudget" % p
        rep.check(pdb.get("apiVersion") == "policy/v1", w, "apiVersion must be policy/v1")
        s = pdb.get("spec") or {}
        rep.check(labels_match((s.get("selector") or {}).get("matchLabels"), pod_labels), w,
                  "selector does not match the Deployment's pods")
        rep.check(("minAvailable" in s) != ("maxUnavailable" in s), w, "exactly one of minAvailable/maxUnavailable")
        if isinstance(s.get("minAvailable"), int):
            rep.check(s["minAvailable"] < min_rep, w, "minAvailable >= minReplicas blocks every node drain")


def yaml_docs(text):
    try:
        return [d for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError:
        return []


def check_k8s_models(rep, pspec, ctr, env, w):
    """The Deployment serves every model directory of a read-only volume at
    /models (a PersistentVolumeClaim or an OCI image volume)."""
    rep.check(env.get("TRANSFORMERD_MODELS_DIR") == "/models", w,
              "TRANSFORMERD_MODELS_DIR=/models (the read-only models volume) missing (got %r)"
              % env.get("TRANSFORMERD_MODELS_DIR"))
    rep.check(not env.get("TRANSFORMERD_MODEL"), w, "TRANSFORMERD_MODEL pins a model besides the volume's")
    mounts = [m for m in ctr.get("volumeMounts") or [] if m.get("mountPath") == "/models"]
    if not rep.check(mounts and mounts[0].get("readOnly") is True, w, "no readOnly volumeMount at /models"):
        return
    vols = {v.get("name"): v for v in pspec.get("volumes") or []}
    v = vols.get(mounts[0].get("name")) or {}
    pvc = v.get("persistentVolumeClaim") or {}
    rep.check((pvc.get("claimName") and pvc.get("readOnly") is True) or (v.get("image") or {}).get("reference"), w,
              "the models volume must be a readOnly persistentVolumeClaim or an image volume")


# --------------------------------------------------------------------------
# Kustomize overlays, rendered here (no kubectl on the machines that run
# the checks): resources, components, replicas, images, and patches that
# are either strategic merges (maps merged, lists of named maps merged by
# name, `$patch: delete` drops the object, null drops a key) or JSON 6902
# operations (add, remove, replace) with a kind/name/group target.

def smp(base, patch):
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return patch
    out = dict(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list) and isinstance(out.get(k), list) and v and all(
                isinstance(x, dict) and "name" in x for x in v + out[k]):
            merged = list(out[k])
            for item in v:
                idx = [i for i, x in enumerate(merged) if x.get("name") == item.get("name")]
                if idx:
                    merged[idx[0]] = smp(merged[idx[0]], item)
                else:
                    merged.append(item)
            out[k] = merged
        else:
            out[k] = smp(out.get(k), v)
    return out


def json6902(doc, ops):
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node = doc
        for p in parts[:-1]:
            node = node[int(p)] if isinstance(node, list) else node[p]
        last = parts[-1]
        if isinstance(node, list):
            last = len(node) if last == "-" else int(last)
        if op["op"] == "remove":
            del node[last]
        elif op["op"] == "replace":
            if not isinstance(node, list) and last not in node:
                raise KeyError(op["path"])
            node[last] = op["value"]
        elif op["op"] == "add":
            if isinstance(node, list):
                node.insert(last, op["value"])
            else:
                node[last] = op["value"]
        else:
            raise ValueError("op %s" % op["op"])
    return doc


def kustomize(files, kdir, seen=()):
    """The objects kustomize would build from the directory kdir (relative
    to the root), as [(origin path, object)]; raises ValueError on a layout
    error (a missing file, a patch that does not apply)."""
    kpath = os.path.normpath(kdir + "/kustomization.yaml")
    if kpath in seen or kpath not in files:
        raise ValueError("%s: no such kustomization" % kpath)
    k = yaml.safe_load(files[kpath]) or {}
    docs = []
    for r in k.get("resources") or []:
        rp = os.path.normpath(os.path.join(kdir, r))
        if rp + "/kustomization.yaml" in files:
            docs += kustomize(files, rp, seen + (kpath,))
        elif rp in files:
            docs += [(rp, d) for d in yaml_docs(files[rp])]
        else:
            raise ValueError("%s: resource %s not found" % (kpath, r))
    for c in k.get("components") or []:
        cp = os.path.normpath(os.path.join(kdir, c))
        ck = yaml.safe_load(files.get(cp + "/kustomization.yaml", "")) or {}
        if ck.get("kind") != "Component":
            raise ValueError("%s: %s is not a Component" % (kpath, c))
        for r in ck.get("resources") or []:
            rp = os.path.normpath(os.path.join(cp, r))
            if rp not in files:
                raise ValueError("%s: resource %s not found" % (cp, r))
            docs += [(rp, d) for d in yaml_docs(files[rp])]
        docs = apply_kustomization(files, cp, ck, docs)
    if k.get("kind") == "Kustomization":
        docs = apply_kustomization(files, kdir, dict(k, resources=[]), docs)
    return docs


def apply_kustomization(files, kdir, k, docs):
    docs = [(p, json.loads(json.dumps(d))) for p, d in docs]
    for rep_ in k.get("replicas") or []:
        hit = [d for _, d in docs if d.get("kind") in ("Deployment", "StatefulSet")
               and d["metadata"].get("name") == rep_["name"]]
        if not hit:
            raise ValueError("%s: replicas: no workload %s" % (kdir, rep_["name"]))
        for d in hit:
            d["spec"]["replicas"] = rep_["count"]
    for im in k.get("images") or []:
        for _, d in docs:
            for c in ((d.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []:
                name, _, tag = str(c.get("image", "")).partition(":")
                if name == im["name"]:
                    c["image"] = im.get("newName", name) + ":" + str(im.get("newTag", tag or "latest"))
    for pt in k.get("patches") or []:
        text = pt.get("patch") if "patch" in pt else files.get(os.path.normpath(os.path.join(kdir, pt.get("path", ""))))
        if text is None:
            raise ValueError("%s: patch %s not found" % (kdir, pt.get("path")))
        body = yaml.safe_load(text)
        tgt = pt.get("target") or {}
        if not tgt and isinstance(body, dict):
            tgt = {"kind": body.get("kind"), "name": (body.get("metadata") or {}).get("name")}
        sel = [(i, d) for i, (_, d) in enumerate(docs)
               if d.get("kind") == tgt.get("kind") and (not tgt.get("name") or d["metadata"].get("name") == tgt["name"])
               and (not tgt.get("group") or str(d.get("apiVersion", "")).startswith(tgt["group"] + "/"))]
        drop = []
        for i, d in sel:
            if isinstance(body, list):
                try:
                    json6902(d, body)
                except (KeyError, IndexError, ValueError) as e:
                    raise ValueError("%s: patch on %s/%s does not apply: %s" % (kdir, d["kind"], d["metadata"]["name"], e))
            elif body.get("$patch") == "delete":
                drop.append(i)
            else:
                docs[i] = (docs[i][0], smp(d, body))
        docs = [x for i, x in enumerate(docs) if i not in drop]
    return docs


def k8s_validate(rep, where, doc, schemas):
    """Schema validation of one object: kubernetes-validate for the core
    API, the committed JSON schemas for KEDA; True when it passed."""
    kind = doc.get("kind")
    if kind == "ScaledObject":
        try:
            import jsonschema
        except ImportError:
            return True
        errs = sorted(jsonschema.Draft202012Validator(schemas["keda"]).iter_errors(doc), key=str)
        return rep.check(not errs, where, "ScaledObject schema (%s): %s" % (KEDA_SCHEMA, "; ".join(
            "%s: %s" % ("/".join(map(str, e.absolute_path)), e.message) for e in errs[:3])))
    try:
        import kubernetes_validate
    except ImportError:
        return True
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        return rep.check(True, where, "")
    except kubernetes_validate.ValidationError as e:
        return rep.check(False, where, "kubernetes-validate %s: %s at %s" % (
            K8S_VERSION, e.message, "/".join(map(str, getattr(e, "path", [])))))
    except Exception as e:  # a kind it has no schema for
        return rep.check(False, where, "kubernetes-validate %s: %s" % (K8S_VERSION, e))


def validators_present():
    try:
        import jsonschema  # noqa: F401
        import kubernetes_validate  # noqa: F401
        return True
    except ImportError:
        return False


def check_k8s_render(rep, files):
    """Every manifest against its schema; every overlay rendered: one
    autoscaler, the numbers of components/scaling, the GPU or CPU variant."""
    try:
        schemas = {"keda": json.loads(files[KEDA_SCHEMA]), "adapter": json.loads(files[ADAPTER_SCHEMA])}
    except (KeyError, ValueError) as e:
        rep.check(False, SCHEMA_DIR, "schemas: %s" % e)
        return
    # every object file on its own
    for path in sorted(p for p in files if p.startswith("deploy/k8s/") and p.endswith(".yaml")):
        for d in yaml_docs(files[path]):
            if isinstance(d, dict) and d.get("kind") and not str(d.get("apiVersion", "")).startswith("kustomize."):
                k8s_validate(rep, path, d, schemas)
    # prometheus-adapter's rules
    vals = (yaml_docs(files.get(ADAPTER_VALUES, "")) or [{}])[0]
    custom = ((vals.get("rules") or {}).get("custom")) or []
    if rep.check(custom, ADAPTER_VALUES, "no rules.custom"):
        try:
            import jsonschema
            for i, r in enumerate(custom):
                errs = list(jsonschema.Draft202012Validator(schemas["adapter"]).iter_errors(r))
                rep.check(not errs, ADAPTER_VALUES, "rules.custom[%d] schema (%s): %s" % (
                    i, ADAPTER_SCHEMA, "; ".join(e.message for e in errs[:3])))
        except ImportError:
            pass
        rep.check(any("transformerd_queue_depth" in r.get("seriesQuery", "") for r in custom), ADAPTER_VALUES,
                  "no rule for transformerd_queue_depth")
    # the numbers, from the one place
    sc = (yaml_docs(files.get(SCALING, "")) or [{}])[0]
    want = {"replicas": None, "min": None, "max": None, "target": None, "query": None}
    for r in sc.get("replicas") or []:
        want["replicas"] = r.get("count")
    for pt in sc.get("patches") or []:
        body = yaml.safe_load(pt.get("patch") or "{}") or {}
        spec = body.get("spec") or {}
        if body.get("kind") == "HorizontalPodAutoscaler":
            want["min"], want["max"] = spec.get("minReplicas"), spec.get("maxReplicas")
            for m in spec.get("metrics") or []:
                if m.get("type") == "Pods":
                    want["target"] = str(((m.get("pods") or {}).get("target") or {}).get("averageValue"))
        elif body.get("kind") == "ScaledObject":
            for t in spec.get("triggers") or []:
                want["query"] = (t.get("metadata") or {}).get("query")
    rep.check(None not in want.values(), SCALING, "must set replicas, the HPA's min/max/target and KEDA's query")
    rep.check(want["replicas"] == want["min"], SCALING, "replicas %s != minReplicas %s" % (want["replicas"], want["min"]))
    overlays = sorted(os.path.dirname(p) for p in files if fnmatch.fnmatch(p, K8S_OVERLAYS_GLOB))
    rep.check(len(overlays) >= 3, "deploy/k8s/overlays", "expected the gpu, cpu and gpu-keda overlays")
    drain, write_s = serve_timing(files)
    for od in overlays:
        try:
            docs = kustomize(files, od)
        except (ValueError, KeyError, TypeError, yaml.YAMLError) as e:
            rep.check(False, od, "does not render: %s" % e)
            continue
        for p, d in docs:
            k8s_validate(rep, "%s (rendered, from %s)" % (od, p), d, schemas)
        kinds = {}
        for _, d in docs:
            kinds.setdefault(d.get("kind"), []).append(d)
        scalers = kinds.get("HorizontalPodAutoscaler", []) + kinds.get("ScaledObject", [])
        if not rep.check(len(scalers) == 1, od, "needs exactly one autoscaler (HPA or ScaledObject), has %d" % len(scalers)):
            continue
        for k in ("Deployment", "Service", "PodDisruptionBudget"):
            rep.check(k in kinds, od, "no %s" % k)
        dep = (kinds.get("Deployment") or [{}])[0]
        rep.check(dep.get("spec", {}).get("replicas") == want["replicas"], od,
                  "Deployment replicas %s, components/scaling says %s" % (dep.get("spec", {}).get("replicas"), want["replicas"]))
        a = scalers[0]["spec"]
        if scalers[0]["kind"] == "ScaledObject":
            trig = [t for t in a.get("triggers") or [] if t.get("type") == "prometheus"]
            got = (a.get("minReplicaCount"), a.get("maxReplicaCount"),
                   trig and str(trig[0]["metadata"].get("threshold")))
            rep.check(trig and trig[0].get("metricType", "AverageValue") == "AverageValue", od,
                      "KEDA's prometheus trigger must be metricType AverageValue (per replica, as the HPA)")
            rep.check(trig and "transformerd_queue_depth" in trig[0]["metadata"].get("query", ""), od,
                      "KEDA's query must read transformerd_queue_depth")
        else:
            q = [m for m in a.get("metrics") or [] if m.get("type") == "Pods"]
            got = (a.get("minReplicas"), a.get("maxReplicas"),
                   q and str(q[0]["pods"]["target"].get("averageValue")))
        rep.check(got == (want["min"], want["max"], want["target"]), od,
                  "autoscaler min/max/target %s, components/scaling says %s"
                  % (got, (want["min"], want["max"], want["target"])))
        pspec = dep["spec"]["template"]["spec"]
        ctr = pspec["containers"][0]
        env = {e.get("name"): e.get("value") for e in ctr.get("env") or []}
        res = ctr.get("resources") or {}
        gpu = "nvidia.com/gpu" in (res.get("limits") or {})
        cpu_overlay = os.path.basename(od).startswith("cpu")
        rep.check(gpu != cpu_overlay and (env.get("TRANSFORMERD_DEVICE") == "cpu") == cpu_overlay, od,
                  "the %s variant must %s nvidia.com/gpu with TRANSFORMERD_DEVICE=%s" % (
                      "CPU" if cpu_overlay else "GPU", "not request" if cpu_overlay else "request",
                      "cpu" if cpu_overlay else "cuda"))
        rep.check(not cpu_overlay or not pspec.get("tolerations"), od, "the CPU variant tolerates GPU nodes' taint")
        d_s = int(env.get("TRANSFORMERD_DRAIN_TIMEOUT_S") or drain)
        cmd = ((ctr.get("lifecycle") or {}).get("preStop") or {}).get("exec", {}).get("command") or ["", "0"]
        pre = int(cmd[-1]) if str(cmd[-1]).isdigit() else 0
        rep.check(pspec.get("terminationGracePeriodSeconds", 30) > pre + d_s + write_s, od,
                  "terminationGracePeriodSeconds must exceed preStop + drain + write")
        check_k8s_models(rep, pspec, ctr, env, od)


# --------------------------------------------------------------------------
# systemd

def parse_unit(text):
    """{section: {key: [values in order]}} (continuation lines joined)."""
    out, sec, buf = {}, None, ""
    for raw in text.splitlines():
        line = buf + raw.strip()
        buf = ""
        if line.endswith("\\"):
            buf = line[:-1] + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            sec = line[1:-1]
            out.setdefault(sec, {})
        elif "=" in line and sec:
            k, _, v = line.partition("=")
            out[sec].setdefault(k.strip(), []).append(v.strip())
    return out


def unit_seconds(v):
    m = re.fullmatch(r"(?:(\d+)min)?\s*(?:(\d+)s?)?", v.strip())
    if not m or not any(m.groups()):
        return None
    return int(m.group(1) or 0) * 60 + int(m.group(2) or 0)


def check_unit(rep, files, drain_default, write_s, daemon):
    text = files.get(UNIT)
    if not rep.check(text is not None, UNIT, "missing"):
        return
    svc = parse_unit(text).get("Service", {})

    def last(k, d=None):
        return svc[k][-1] if k in svc else d

    w = UNIT
    rep.check("transformerd serve" in (last("ExecStart") or ""), w, "ExecStart must run `transformerd serve`")
    rep.check(last("DynamicUser") == "yes" or last("User") not in (None, "", "root", "0"), w,
              "DynamicUser=yes or a dedicated User= missing")
    rep.check(last("ProtectSystem") == "strict", w, "ProtectSystem=strict missing")
    rep.check(last("ProtectHome") in ("yes", "read-only", "tmpfs"), w, "ProtectHome missing")
    rep.check(last("PrivateTmp") == "yes", w, "PrivateTmp=yes missing")
    rep.check(last("NoNewPrivileges") == "yes", w, "NoNewPrivileges=yes missing")
    fams = last("RestrictAddressFamilies") or ""
    rep.check(fams and "AF_INET" in fams and not fams.startswith("~"), w,
              "RestrictAddressFamilies= (an allow-list with AF_INET) missing")
    rep.check("CapabilityBoundingSet" in svc and last("CapabilityBoundingSet") == "", w,
              "CapabilityBoundingSet= (empty) missing")
    rep.check(last("MemoryDenyWriteExecute") == "yes", w, "MemoryDenyWriteExecute=yes missing")
    rep.check(last("Restart") in ("on-failure", "always"), w, "Restart=on-failure missing")
    rep.check(bool(last("EnvironmentFile")), w, "EnvironmentFile= missing")
    rep.check(last("KillSignal", "SIGTERM") == "SIGTERM", w, "KillSignal must be SIGTERM")
    env = {}
    for e in svc.get("Environment", []):
        for item in shlex.split(e):
            k, _, v = item.partition("=")
            env[k] = v
    check_models_env(rep, env, w + " Environment=")
    # the environment file overrides the unit: it must not change the models
    # by default (its model settings are commented-out examples)
    envfile = files.get(UNIT_ENV)
    if rep.check(envfile is not None, UNIT_ENV, "missing"):
        set_here = [l.split("=", 1)[0].strip() for l in envfile.splitlines()
                    if l.strip() and not l.strip().startswith("#") and "=" in l]
        rep.check(not [k for k in set_here if k in ("TRANSFORMERD_MODEL", "TRANSFORMERD_MODELS_DIR")], UNIT_ENV,
                  "sets TRANSFORMERD_MODEL / TRANSFORMERD_MODELS_DIR, overriding the unit's default (every model "
                  "under %s)" % MODELS_DIR)
    drain = int(env.get("TRANSFORMERD_DRAIN_TIMEOUT_S", drain_default))
    stop = unit_seconds(last("TimeoutStopSec", "90"))
    rep.check(stop is not None and stop > drain + write_s, w,
              "TimeoutStopSec=%s must exceed the drain deadline %d s + %d s" % (last("TimeoutStopSec"), drain, write_s))
    # systemd's own parser, where there is one (ExecStart must name a file).
    sa = shutil.which("systemd-analyze")
    if sa and os.path.exists(daemon or ""):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "transformerd.service")
            with open(p, "w") as f:
                f.write(text.replace("/usr/local/bin/transformerd", os.path.abspath(daemon)))
            r = subprocess.run([sa, "verify", p], capture_output=True, text=True, timeout=60)
            rep.check(r.returncode == 0, w, "systemd-analyze verify: %s" % (r.stderr.strip() or r.stdout.strip()))


# --------------------------------------------------------------------------
# external linters

def lint(rep, root, hadolint, yamllint, log):
    hl = hadolint or shutil.which("hadolint")
    if hl:
        r = subprocess.run([hl, "--no-color", os.path.join(root, DOCKERFILE)], capture_output=True, text=True)
        rep.check(r.returncode == 0, DOCKERFILE, "hadolint:\n" + r.stdout + r.stderr)
        log.append("hadolint %s: %s" % (DOCKERFILE, "ok" if r.returncode == 0 else "FAILED"))
    else:
        log.append("hadolint: not installed, skipped (tools/check_deploy.sh installs it)")
    yl = yamllint or shutil.which("yamllint")
    if yl:
        cfg = ("{extends: default, rules: {line-length: {max: 120}, document-start: disable, "
               "comments: {min-spaces-from-content: 1}, truthy: {check-keys: false}}}")
        paths = [os.path.join(root, p) for p in [COMPOSE] + sorted(glob.glob(os.path.join(root, K8S_GLOB)))
                 + sorted(glob.glob(os.path.join(root, K8S_EXTRAS_GLOB)))
                 + sorted(glob.glob(os.path.join(root, K8S_COMPONENTS_GLOB)))
                 + sorted(glob.glob(os.path.join(root, K8S_OVERLAYS_GLOB)))]
        paths = [p for p in paths if os.path.exists(p)]
        r = subprocess.run([yl, "-f", "parsable", "-d", cfg] + paths, capture_output=True, text=True)
        rep.check(r.returncode == 0, "yamllint", r.stdout + r.stderr)
        log.append("yamllint (%d files): %s" % (len(paths), "ok" if r.returncode == 0 else "FAILED"))
    else:
        log.append("yamllint: not installed, skipped (tools/check_deploy.sh installs it)")
    hp = shutil.which("haproxy")
    cfg = os.path.join(root, "deploy", "haproxy.cfg")
    if hp and os.path.exists(cfg):
        env = dict(os.environ, TD_LISTEN="127.0.0.1:8080", TD_R1="127.0.0.1:8081", TD_R2="127.0.0.1:8082",
                   TD_R3="127.0.0.1:8083", TD_ADMIN_SOCKET=os.path.join(tempfile.gettempdir(), "td-check.sock"))
        r = subprocess.run([hp, "-c", "-f", cfg], capture_output=True, text=True, env=env)
        rep.check(r.returncode == 0, "deploy/haproxy.cfg", "haproxy -c:\n" + r.stdout + r.stderr)
        log.append("haproxy -c deploy/haproxy.cfg: %s" % ("ok" if r.returncode == 0 else "FAILED"))
    else:
        log.append("haproxy: not installed, deploy/haproxy.cfg not checked")


# --------------------------------------------------------------------------

def load(root):
    files = {}
    names = [DOCKERFILE, DOCKERIGNORE, COMPOSE, UNIT, UNIT_ENV, DEPLOY_README, SERVE_C, METRICS_C]
    names += [os.path.relpath(p, root) for g in (K8S_GLOB, K8S_EXTRAS_GLOB, K8S_COMPONENTS_GLOB, K8S_OVERLAYS_GLOB)
              for p in glob.glob(os.path.join(root, g))]
    names += [KEDA_SCHEMA, ADAPTER_SCHEMA, HAPROXY]
    for n in names:
        p = os.path.join(root, n)
        if os.path.exists(p):
            with open(p, encoding="utf-8") as f:
                files[n] = f.read()
    return files


def check_haproxy(rep, files):
    """deploy/haproxy.cfg: readiness checks, retries only without an answer,
    redispatch, and each server's downloads routed to it."""
    text = files.get(HAPROXY)
    if text is None:
        return
    rep.check(re.search(r"(?m)^\s*option httpchk GET /health/ready\s*$", text), HAPROXY,
              "health checks must be option httpchk GET /health/ready")
    retry = re.search(r"(?m)^\s*retry-on (.*)$", text)
    rep.check(retry and "conn-failure" in retry.group(1).split() and
              not set(retry.group(1).split()) & {"503", "500", "504", "all-retryable-errors", "response-timeout"},
              HAPROXY, "retry-on must retry conn-failure and never an answer (5xx) or a slow one")
    rep.check(re.search(r"(?m)^\s*option redispatch\b", text), HAPROXY, "option redispatch missing")
    servers = re.findall(r"(?m)^\s*server (\S+) ", text)
    rep.check(servers, HAPROXY, "no server")
    for s in servers:
        rep.check(re.search(r"(?m)^\s*use-server %s if \{ path_beg /download_file/%s/ \}" % (re.escape(s), re.escape(s)),
                            text), HAPROXY, "server %s: its downloads (/download_file/%s/) are not routed to it" % (s, s))


def check_readme(rep, files):
    text = files.get(DEPLOY_README, "")
    rep.check("prometheus-adapter" in text, DEPLOY_README,
              "must document the metrics adapter (prometheus-adapter) the queue-depth HPA needs")
    rep.check("TRANSFORMERD_MODELS_DIR=%s" % MODELS_DIR in text or "| `%s` |" % MODELS_DIR in text, DEPLOY_README,
              "must document the default models directory (TRANSFORMERD_MODELS_DIR=%s)" % MODELS_DIR)
    rep.check("TRANSFORMERD_MODELS_DIR=/models" in text, DEPLOY_README,
              "must document serving the mounted models (TRANSFORMERD_MODELS_DIR=/models)")
    rep.check(re.search(r"TRANSFORMERD_MODELS_DIR= +-e TRANSFORMERD_MODEL=/models/", text), DEPLOY_README,
              "must document serving one mounted model (-e TRANSFORMERD_MODELS_DIR= -e TRANSFORMERD_MODEL=/models/NAME)")


def run_checks(files, cuda_major, daemon):
    rep = Report()
    drain, write_s = serve_timing(files)
    check_dockerfile(rep, files, cuda_major)
    check_dockerignore(rep, files)
    check_compose(rep, files, drain, write_s)
    check_k8s(rep, files, drain, write_s)
    check_k8s_render(rep, files)
    check_haproxy(rep, files)
    check_unit(rep, files, drain, write_s, daemon)
    check_readme(rep, files)
    return rep


# --------------------------------------------------------------------------
# The daemon with the deployment's environment (--daemon)

def bundled_models(models):
    """The model directories `--models-dir models` serves: subdirectories
    with config.json and model.safetensors, by name."""
    if not os.path.isdir(models):
        return []
    return sorted(n for n in os.listdir(models) if not n.startswith(".")
                  and os.path.isfile(os.path.join(models, n, "config.json"))
                  and os.path.isfile(os.path.join(models, n, "model.safetensors")))


def run_daemon(daemon, env, timeout=120):
    """Starts `daemon serve` with env; returns (exit status or None, the
    names GET /v1/models lists once ready or None, the log's tail)."""
    with tempfile.TemporaryFile(mode="w+") as log:
        p = subprocess.Popen([daemon, "serve"], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=log)
        names, rc = None, None
        try:
            deadline, port = time.monotonic() + timeout, None
            while time.monotonic() < deadline:
                rc = p.poll()
                log.seek(0)
                text = log.read()
                if rc is not None:
                    break
                if port is None:
                    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
                    port = m.group(1) if m else None
                if port is not None:
                    try:
                        with urllib.request.urlopen("http://127.0.0.1:%s/health/ready" % port, timeout=5) as r:
                            ready = r.status == 200
                    except (urllib.error.URLError, OSError):
                        ready = False
                    if ready:
                        with urllib.request.urlopen("http://127.0.0.1:%s/v1/models" % port, timeout=30) as r:
                            names = [m.get("name") for m in json.load(r).get("models") or []]
                        break
                time.sleep(0.2)
        finally:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            else:
                rc = p.returncode
            log.seek(0)
            tail = " | ".join(log.read().strip().splitlines()[-3:])
        return rc, names, tail


def check_daemon(rep, root, files, daemon):
    """The CPU image's ENV, run here: the default serves every model of the
    repository's models/ (what the image bundles); an empty models directory
    is exit 2 (a configuration error); the documented one-model override serves that model."""
    w = "%s stage 'cpu' ENV, run by %s" % (DOCKERFILE, daemon)
    stages, _ = parse_dockerfile(files.get(DOCKERFILE, ""))
    cpu = [st for st in stages if st["name"] == "cpu"]
    if not rep.check(cpu, w, "no 'cpu' stage to take the environment from"):
        return
    image_env = env_of(cpu[0])
    models = os.path.join(root, "models")

    def env_with(over):
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRANSFORMERD_")}
        for k, v in image_env.items():  # the image's paths, mapped to this checkout
            env[k] = os.path.join(models, v[len(MODELS_DIR):].lstrip("/")).rstrip("/") \
                if v == MODELS_DIR or v.startswith(MODELS_DIR + "/") else v
        env.update({"TRANSFORMERD_HOST": "127.0.0.1", "TRANSFORMERD_PORT": "0", "TRANSFORMERD_THREADS": "1",
                    "TRANSFORMERD_DRAIN_TIMEOUT_S": "5", "OPENBLAS_NUM_THREADS": "1"})
        env.update(over)
        return env

    want = bundled_models(models)
    if want:
        rc, names, tail = run_daemon(daemon, env_with({}))
        rep.check(names == want, w, "serves %s, want every model under models/: %s (exit %s; log: %s)"
                  % (names, want, "-" if rc is None else rc, tail))
        print("check_deploy: the image's default environment serves %s" % names)
        one = os.path.join(models, want[-1])
        rc, names, tail = run_daemon(daemon, env_with({"TRANSFORMERD_MODELS_DIR": "", "TRANSFORMERD_MODEL": one}))
        rep.check(names == [want[-1]], w, "with TRANSFORMERD_MODELS_DIR= TRANSFORMERD_MODEL=%s: serves %s, "
                  "want only %s (exit %s; log: %s)" % (one, names, want[-1], "-" if rc is None else rc, tail))
    else:
        print("check_deploy: no model under models/: the default environment's models not run")
    with tempfile.TemporaryDirectory() as empty:
        rc, names, tail = run_daemon(daemon, env_with({"TRANSFORMERD_MODELS_DIR": empty}), timeout=60)
        rep.check(rc == 2 and names is None and "no model directory" in tail, w,
                  "with an empty models directory (an image built without models/): exit %s, want 2 with "
                  "'no model directory' (log: %s)" % ("none, it ran" if rc is None else rc, tail))


# Each mutation breaks one required field (every match of the regex is
# replaced); the checker must report it.
# (file, regex, replacement, text the error must contain)
MUTATIONS = [
    (DOCKERFILE, r"(?m)^USER .*\n", "", "USER"),
    (DOCKERFILE, r"(?m)^HEALTHCHECK .*\\\n.*\n", "", "HEALTHCHECK"),
    (DOCKERFILE, r"(?m)^EXPOSE 8080$", "EXPOSE 9090", "EXPOSE"),
    (DOCKERFILE, r"(?m)^STOPSIGNAL SIGTERM$", "STOPSIGNAL SIGKILL", "STOPSIGNAL"),
    (DOCKERFILE, r"(?m)^ENTRYPOINT \[.*\]$", "ENTRYPOINT /usr/local/bin/transformerd serve", "ENTRYPOINT"),
    (DOCKERFILE, r"-runtime-", "-base-", "runtime stage"),
    (DOCKERFILE, r"\$\{CUDA_VERSION\}-runtime", "12.8.1-runtime", "does not match"),
    (DOCKERFILE, r"RUN sh tools/bootstrap\.sh && ", "RUN ", "bootstrap.sh"),
    (DOCKERFILE, r"-DTD_CUDA=ON", "-DTD_CUDA=AUTO", "TD_CUDA=ON"),
    (DOCKERFILE, r"libjansson4", "libjansson-dev", "more than the runtime"),
    (DOCKERFILE, r"TRANSFORMERD_HOST=0\.0\.0\.0", "TRANSFORMERD_HOST=127.0.0.1", "TRANSFORMERD_HOST"),
    (DOCKERFILE, r"ENV TRANSFORMERD_MODELS_DIR=/opt/transformerd/models ",
     "ENV TRANSFORMERD_MODEL=/opt/transformerd/models/en-de ", "TRANSFORMERD_MODELS_DIR"),
    (DOCKERFILE, r"ENV TRANSFORMERD_MODELS_DIR=", "ENV TRANSFORMERD_MODEL=/models/NAME TRANSFORMERD_MODELS_DIR=",
     "pins a model"),
    (DOCKERFILE, r"AS cpu\n", "AS slim\n", "'cpu'"),
    (DOCKERIGNORE, r"$", "\nmodels\n", "models/en-de"),
    (DOCKERIGNORE, r"(?m)^\.(\*|git)\n", "", ".git"),
    (COMPOSE, r"(?m)^\s*capabilities: \[gpu\]\n", "", "reservations"),
    (COMPOSE, r"stop_grace_period: \d+s", "stop_grace_period: 20s", "stop_grace_period"),
    (COMPOSE, r"(?m)^\s*profiles: \[cpu\]\n", "", "'cpu' profile"),
    (COMPOSE, r"/health/ready", "/health/live", "healthcheck"),
    (COMPOSE, r":/models:ro", ":/srv:ro", "/models"),
    (COMPOSE, r"(?m)^(\s+TRANSFORMERD_MODELS_DIR:).*$", r"\1 /opt/transformerd/models/en-de", "TRANSFORMERD_MODELS_DIR"),
    (COMPOSE, r"(?m)^(\s+TRANSFORMERD_MODEL:)", r"\1 /models/en-de", "pins a model"),
    (COMPOSE, r"\$\{MODELS_HOST_DIR:-", "${TRANSFORMERD_MODELS_DIR:-", "host path"),
    ("deploy/k8s/deployment.yaml", r"terminationGracePeriodSeconds: \d+", "terminationGracePeriodSeconds: 35",
     "terminationGracePeriodSeconds"),
    ("deploy/k8s/deployment.yaml", r"(?m)^\s*nvidia\.com/gpu: 1\n", "", "nvidia.com/gpu"),
    ("deploy/k8s/deployment.yaml", r"path: /health/ready", "path: /health/live", "readinessProbe"),
    ("deploy/k8s/deployment.yaml", r"livenessProbe:", "livenessProbeX:", "livenessProbe"),
    ("deploy/k8s/deployment.yaml", r"value: 0\.0\.0\.0", "value: 127.0.0.1", "TRANSFORMERD_HOST"),
    ("deploy/k8s/deployment.yaml", r"(?m)^(\s+)- name: TRANSFORMERD_MODELS_DIR\n(\s+)value: .*$",
     r"\1- name: TRANSFORMERD_MODEL\n\2value: /opt/transformerd/models/en-de", "TRANSFORMERD_MODELS_DIR"),
    ("deploy/k8s/service.yaml", r"(?m)^(\s+)app\.kubernetes\.io/name: transformerd\s*$(?![\s\S]*selector)",
     r"\1app.kubernetes.io/name: other", "selector"),
    ("deploy/k8s/hpa.yaml", r"autoscaling/v2", "autoscaling/v1", "autoscaling/v2"),
    ("deploy/k8s/hpa.yaml", r"name: cpu", "name: memory", "cpu metric"),
    ("deploy/k8s/pdb.yaml", r"maxUnavailable: 1", "maxUnavailable: 1\n  minAvailable: 1", "exactly one"),
    (QUEUE_HPA, r"name: transformerd_queue_depth", "name: queue", "transformerd_queue_depth"),
    (DEPLOY_README, r"prometheus-adapter", "an adapter", "prometheus-adapter"),
    (DEPLOY_README, r"TRANSFORMERD_MODELS_DIR= +-e", "-e", "one mounted model"),
    (DEPLOY_README, r"TRANSFORMERD_MODELS_DIR=/models\b", "TRANSFORMERD_MODEL=/models", "the mounted models"),
    (UNIT, r"(?m)^Environment=TRANSFORMERD_MODELS_DIR=.*$", "Environment=TRANSFORMERD_MODEL=/opt/transformerd/models/en-de",
     "TRANSFORMERD_MODELS_DIR"),
    (UNIT_ENV, r"(?m)^# (TRANSFORMERD_MODELS_DIR=)$", r"\1", "overriding"),
    (UNIT, r"(?m)^ProtectSystem=strict\n", "", "ProtectSystem"),
    (UNIT, r"(?m)^TimeoutStopSec=\d+$", "TimeoutStopSec=30", "TimeoutStopSec"),
    (UNIT, r"(?m)^MemoryDenyWriteExecute=yes\n", "", "MemoryDenyWriteExecute"),
    (UNIT, r"(?m)^CapabilityBoundingSet=$", "CapabilityBoundingSet=CAP_NET_ADMIN", "CapabilityBoundingSet"),
    (UNIT, r"(?m)^DynamicUser=yes\n", "", "DynamicUser"),
    (UNIT, r"(?m)^Restart=on-failure\n", "", "Restart"),
    (UNIT, r"(?m)^EnvironmentFile=.*\n", "", "EnvironmentFile"),
    (UNIT, r"(?m)^NoNewPrivileges=yes\n", "", "NoNewPrivileges"),
    (UNIT, r"(?m)^PrivateTmp=yes\n", "", "PrivateTmp"),
    (UNIT, r"(?m)^ProtectHome=yes\n", "", "ProtectHome"),
    (UNIT, r"(?m)^RestrictAddressFamilies=.*\n", "", "RestrictAddressFamilies"),
]


# Planted wrong fields the schemas must catch (with kubernetes-validate and
# jsonschema installed, as tools/check_deploy.sh does), and the overlays'
# invariants.
SCHEMA_MUTATIONS = [
    ("deploy/k8s/deployment.yaml", r"automountServiceAccountToken: false", "automountServiceAccountTokens: false",
     "kubernetes-validate"),
    ("deploy/k8s/pdb.yaml", r"maxUnavailable: 1", "maxUnavailabe: 1", "kubernetes-validate"),
    ("deploy/k8s/components/keda/scaledobject.yaml", r"minReplicaCount: 2", "minReplicas: 2", "ScaledObject schema"),
    ("deploy/k8s/components/keda/scaledobject.yaml", r"threshold: \"16\"", "treshold: \"16\"", "ScaledObject schema"),
    (ADAPTER_VALUES, r"seriesQuery:", "seriesQueries:", "rules.custom[0] schema"),
]
OVERLAY_MUTATIONS = [
    (HAPROXY, r"use-server r2 if \{ path_beg /download_file/r2/ \}", "use-server r2 if { path_beg /download_file/r1/ }",
     "downloads"),
    (HAPROXY, r"retry-on conn-failure empty-response", "retry-on conn-failure empty-response 503", "retry-on"),
    (HAPROXY, r"option httpchk GET /health/ready", "option httpchk GET /health/live", "httpchk"),
    (HAPROXY, r"(?m)^    option redispatch 1\n", "", "redispatch"),
    (SCALING, r"count: 2", "count: 3", "replicas"),
    (SCALING, r"threshold: \"16\"", "threshold: \"32\"", "components/scaling says"),
    (SCALING, r"maxReplicas: 8", "maxReplicas: 9", "components/scaling says"),
    (SCALING, r"metricType: AverageValue", "metricType: Value", "AverageValue"),
    ("deploy/k8s/components/cpu/kustomization.yaml",
     r"(?m)^      - op: remove\n        path: /spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu\n", "",
     "CPU variant"),
    ("deploy/k8s/overlays/gpu/kustomization.yaml", r"(?m)^  - ../../components/queue-hpa\n", "", "exactly one autoscaler"),
    ("deploy/k8s/overlays/gpu/kustomization.yaml", r"components/queue-hpa\n",
     "components/queue-hpa\n  - ../../components/keda\n", "exactly one autoscaler"),
    ("deploy/k8s/deployment.yaml", r"readOnly: true\n(?=[\s\S]*volumes:)", "readOnly: false\n", "readOnly volumeMount"),
    ("deploy/k8s/deployment.yaml", r"fieldPath: metadata.name", "fieldPath: metadata.namespace", "TRANSFORMERD_REPLICA_ID"),
    ("deploy/k8s/deployment.yaml", r"secretKeyRef:", "configMapKeyRef:", "TRANSFORMERD_API_KEY"),
]


def self_test(files, cuda_major):
    global MUTATIONS
    MUTATIONS = MUTATIONS + OVERLAY_MUTATIONS + (SCHEMA_MUTATIONS if validators_present() else [])
    if not validators_present():
        print("check_deploy: self-test: kubernetes-validate/jsonschema not installed: "
              "the planted schema errors are not tried")
    base = run_checks(files, cuda_major, None)
    if base.errors:
        print("check_deploy: self-test needs the unmodified files to pass first:", file=sys.stderr)
        for e in base.errors:
            print("  " + e, file=sys.stderr)
        return 1
    missed = 0
    for path, rx, repl, want in MUTATIONS:
        text = files.get(path, "")
        mutated, n = re.subn(rx, repl, text)
        if n == 0 or mutated == text:
            print("self-test: mutation of %s (%s) does not apply: the file changed?" % (path, rx), file=sys.stderr)
            missed += 1
            continue
        rep = run_checks(dict(files, **{path: mutated}), cuda_major, None)
        hit = [e for e in rep.errors if want in e]
        if hit:
            print("self-test: %-40s %-28s -> caught: %s" % (path, want, hit[0].splitlines()[0][:110]))
        else:
            print("self-test: %s: breaking %r (%s) was NOT reported (errors: %s)"
                  % (path, want, rx, rep.errors), file=sys.stderr)
            missed += 1
    print("check_deploy: self-test: %d mutations, %d caught, %d missed" % (len(MUTATIONS), len(MUTATIONS) - missed, missed))
    return 1 if missed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.dirname(here), help="repository root")
    ap.add_argument("--hadolint", help="hadolint executable (default: on PATH, else skipped)")
    ap.add_argument("--yamllint", help="yamllint executable (default: on PATH, else skipped)")
    ap.add_argument("--daemon", help="a transformerd binary: systemd-analyze verify, and the image's "
                    "default environment run on the repository's models/")
    ap.add_argument("--self-test", action="store_true", help="prove every required field is checked")
    a = ap.parse_args()
    files = load(a.root)
    cuda_major = nvcc_major()
    if a.self_test:
        return self_test(files, cuda_major)
    rep = run_checks(files, cuda_major, a.daemon)
    if a.daemon:
        check_daemon(rep, a.root, files, a.daemon)
    log = []
    lint(rep, a.root, a.hadolint, a.yamllint, log)
    for line in log:
        print("check_deploy: " + line)
    if cuda_major is None:
        print("check_deploy: nvcc not found: the CUDA major version of the images was not compared")
    for e in rep.errors:
        print("check_deploy: FAIL " + e, file=sys.stderr)
    print("check_deploy: %d passed, %d failed" % (rep.passed, len(rep.errors)))
    return 1 if rep.errors else 0


if __name__ == "__main__":
    sys.exit(main())
