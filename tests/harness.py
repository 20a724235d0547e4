"""tests/harness.py - what the Python tests that start `transformerd serve`
share (python3's standard library only):

  - spawn(): a process in its own process group that dies with this test
    however it ends (setpriv --pdeathsig KILL: the kernel's
    PR_SET_PDEATHSIG), and kill_group() to end the whole group;
  - Daemon: `DAEMON serve --host 127.0.0.1 --port 0 ARGS` with
    OPENBLAS_NUM_THREADS=1 and no TRANSFORMERD_* variable, its stderr in a
    temporary file, waited for until it logs its port and "ready:" (a
    bounded count of polls, not a time), ended by stop(), by leaving a
    `with` block, and at the interpreter's exit, on every way out;
  - the verdicts: check() counts and prints "ok"/"FAIL", require() and
    fail() end the test at once, skip() exits 77 (ctest's
    SKIP_RETURN_CODE), finish() prints the counts and gives the exit
    status. Messages carry the test's name (its script's).
"""
import atexit
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
TEST = os.path.splitext(os.path.basename(sys.argv[0]))[0]  # the test's name
passed = 0
failed = 0
# False in a test whose check messages say what failed (cluster.py,
# replicas.py): only the failed checks are printed
print_passes = True


def check(cond, what):
    """Counts one check and prints it (see print_passes); returns cond."""
    global passed, failed
    if cond:
        passed += 1
        if print_passes:
            print(f"ok   {what}", flush=True)
    else:
        failed += 1
        print(f"FAIL {what}", flush=True)
    return cond


def fail(why):
    """Ends the test now, as failed."""
    print(f"{TEST}: FAIL: {why}", file=sys.stderr, flush=True)
    sys.exit(1)


def require(cond, why):
    """A check the rest of the test cannot go on without."""
    if not cond:
        fail(why)


def skip(why):
    print(f"{TEST}: SKIPPED: {why}", file=sys.stderr, flush=True)
    sys.exit(SKIP)


def finish():
    """Prints the counts; the exit status: 1 when a check failed."""
    print(f"{TEST}: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


# ---------------------------------------------------------------------------
# processes

_live = []  # every process spawned here and not yet ended


def spawn(argv, stdout=subprocess.DEVNULL, stderr=None, env=None):
    """Starts argv in a new process group (a session of its own) under
    setpriv --pdeathsig KILL: killed when this process dies, even by
    SIGKILL; kill_group() or the exit hook ends it and its children."""
    p = subprocess.Popen(["setpriv", "--pdeathsig", "KILL", *argv], stdout=stdout,
                         stderr=stderr, env=env, start_new_session=True)
    _live.append(p)
    return p


def kill_group(p, sig=signal.SIGKILL):
    """Sends sig to p's process group (nothing when it has ended)."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass


def end(p, wait_s=30):
    """SIGTERM to p's group, SIGKILL when it has not exited within wait_s;
    returns p's exit status."""
    kill_group(p, signal.SIGTERM)
    try:
        rc = p.wait(wait_s)
    except subprocess.TimeoutExpired:
        kill_group(p)
        rc = p.wait()
    if p in _live:
        _live.remove(p)
    return rc


@atexit.register
def end_all():
    """Kills every process spawned here that is still running (at exit too)."""
    for p in list(_live):
        kill_group(p)
        p.wait()
    _live.clear()


# ends the test (and so its daemons, through the exit hook) on ctest's SIGTERM
if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))


def daemon_env(extra=None):
    """The environment a daemon gets: this one without TRANSFORMERD_*, with
    OPENBLAS_NUM_THREADS=1 and extra's variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRANSFORMERD_")}
    env["OPENBLAS_NUM_THREADS"] = "1"
    env.update(extra or {})
    return env


class Daemon:
    """`exe serve --host 127.0.0.1 --port 0 ARGS...`, ready once made.
    url, port; text() is its log so far; stop() (or the end of a `with`
    block, which counts a failed check when it does not exit 0) sends
    SIGTERM. When it exits or never gets ready, the test fails with its
    log."""

    def __init__(self, exe, *args, env=None, polls=1200):
        self.log = tempfile.NamedTemporaryFile(prefix=f"td-{TEST}-", suffix=".log", delete=False)
        self.proc = spawn([exe, "serve", "--host", "127.0.0.1", "--port", "0", *args],
                          stderr=self.log, env=daemon_env(env))
        self.port = self.url = None
        for _ in range(polls):
            text = self.text()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
            if m and "ready:" in text:
                self.port = int(m.group(1))
                self.url = f"http://127.0.0.1:{self.port}"
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        end(self.proc)
        log = self.text()
        os.unlink(self.log.name)
        fail(f"the daemon did not get ready:\n{log}")

    def text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self, wait_s=30):
        """Ends the daemon (SIGTERM, SIGKILL after wait_s) once; its exit
        status (None when it had been ended)."""
        if self.proc is None:
            return None
        rc = end(self.proc, wait_s)
        self.proc = None
        self.tail = self.text()[-2000:]
        os.unlink(self.log.name)
        return rc

    def kill(self):
        """Ends the daemon at once (SIGKILL): one that hangs."""
        return self.stop(wait_s=0)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        rc = self.stop()
        if exc_type is None and rc != 0:
            check(False, f"the daemon's exit status after SIGTERM: {rc}; its log ends:\n{self.tail}")
