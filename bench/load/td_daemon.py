"""What the load scripts (fairness.py, stream_cache.py) share: `DAEMON serve`
on a free loopback port, its stderr in a temporary file, waited for until it
logs "ready:", and stopped. Standard library only."""
import os
import re
import subprocess
import sys
import tempfile
import time


def start(daemon, args, env=None, prefix="td-load-"):
    """Starts `daemon serve --host 127.0.0.1 --port 0 ARGS...` (it dies with
    this process: setpriv --pdeathsig) with OPENBLAS_NUM_THREADS=1 and env's
    variables (a value None removes one); returns (process, port, log path).
    Exits with the log when it does not get ready within 120 s."""
    log = tempfile.NamedTemporaryFile(prefix=prefix, suffix=".log", delete=False)
    e = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    p = subprocess.Popen(["setpriv", "--pdeathsig", "KILL", daemon, "serve",
                          "--host", "127.0.0.1", "--port", "0"] + list(args),
                         stdout=subprocess.DEVNULL, stderr=log, env=e)
    for _ in range(1200):
        text = open(log.name, errors="replace").read()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
        if m and "ready:" in text:
            return p, int(m.group(1)), log.name
        if p.poll() is not None:
            break
        time.sleep(0.1)
    p.kill()
    sys.exit("the daemon did not get ready:\n" + open(log.name, errors="replace").read())


def stop(p, log=None):
    """SIGTERM, then SIGKILL after 30 s; removes the log when given."""
    p.terminate()
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if log:
        os.unlink(log)
