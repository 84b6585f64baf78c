"""Starts the real `reeld`, waits for its systemd-style READY=1 notification (an event, not
a poll), drives it with `reelctl`, and times every command on CLOCK_MONOTONIC. Shared by the
end-to-end tests (Tests/e2e/conftest.py) and `make demo` (scripts/demo.py)."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass

READY_TIMEOUT = 20.0
EXIT_TIMEOUT = 30.0
CTL_TIMEOUT = 30.0


@dataclass
class Ctl:
    """One reelctl call: its result and the monotonic instants around it."""
    args: tuple
    rc: int
    out: str
    err: str
    t0: float
    t1: float

    @property
    def mid(self):
        return (self.t0 + self.t1) / 2

    @property
    def half(self):
        """Half the call's duration: how far the instant it acted may be from mid."""
        return (self.t1 - self.t0) / 2

    def __str__(self):
        return (f"reelctl {' '.join(self.args)} -> rc={self.rc} out={self.out.strip()!r} "
                f"err={self.err.strip()!r} ({(self.t1 - self.t0) * 1000:.1f} ms)")


class Reeld:
    def __init__(self, bindir, opts, name, env=None, listen_fd=None, socket_arg=True):
        """env: extra environment for reeld. listen_fd: a listening socket handed over as
        fd 3 with LISTEN_FDS=1, LISTEN_PID=<reeld's pid> (systemd socket activation).
        socket_arg=False leaves --socket off the command line."""
        self.bindir = bindir
        # AF_UNIX paths are limited to ~107 bytes: keep sockets in a short /tmp dir
        self.dir = tempfile.mkdtemp(prefix="reel-e2e-", dir="/tmp")
        self.out_dir = os.path.join(self.dir, "out")
        os.mkdir(self.out_dir)
        self.socket = os.path.join(self.dir, "ctl.sock")
        self.notify_path = os.path.join(self.dir, "notify.sock")
        self.log_path = os.path.join(self.dir, "reeld.log")
        self.name = name
        self.notifications = []
        self.ctl_log = []
        self.returncode = None
        o = {"video": "test", "audio": "test", "size": "640x360", "fps": "30",
             "pixel-format": "yuyv", "sample-rate": "48000", "channels": "1",
             "preset": "veryfast", "crf": "23", "test-audio-skew-ppm": "0"}
        o.update({k: str(v) for k, v in opts.items() if v is not None and v is not True})
        for k in [k for k, v in opts.items() if v is False]:
            o.pop(k, None)  # False: leave the flag off (so the config file or environment decides)
        self.argv = [os.path.join(bindir, "reeld")] + (["--socket", self.socket] if socket_arg else []) + ["--output-dir", self.out_dir]
        for k, v in o.items():
            # a value that starts with '-' (a negative skew) goes as --key=value so
            # that an option parser cannot take it for a flag
            self.argv += [f"--{k}={v}"] if v.startswith("-") else [f"--{k}", v]
        self.argv += [f"--{k}" for k, v in opts.items() if v is True]

        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.notify_path)
        # A thread drains the socket as datagrams arrive (the kernel queues only ~10, and reeld
        # drops rather than blocks when the queue is full); waiters wait on the condition.
        self._notified = threading.Condition()
        self._reader = threading.Thread(target=self._read_notifications, daemon=True)
        self._reader.start()
        # REEL_CONFIG=/dev/null: an installed /etc/reel/reeld.toml must not leak into tests
        # (an empty file is a valid config); --config or env= override it.
        env = dict(os.environ, NOTIFY_SOCKET=self.notify_path, REEL_CONFIG="/dev/null", **(env or {}))
        self.log = open(self.log_path, "wb")
        argv, extra = self.argv, {}
        if listen_fd is not None:
            # LISTEN_PID must be reeld's own pid: the shell exports its $$ and execs reeld in place.
            env.update(LISTEN_FDS="1", LISTEN_FDNAMES="control")
            argv = ["/bin/sh", "-c", 'LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"'] + self.argv
            extra = dict(pass_fds=(3,), preexec_fn=lambda: os.dup2(listen_fd, 3))
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env, **extra)
        if not self.wait_notify("READY=1", READY_TIMEOUT):
            raise AssertionError(f"reeld sent no READY=1 within {READY_TIMEOUT} s "
                                 f"(exit status {self.proc.poll()})\n{self.log_tail()}")

    def _read_notifications(self):
        while True:
            try:
                data = self.notify.recv(4096)
            except OSError:
                return  # closed
            if not data:
                return  # shut down by close()
            with self._notified:
                self.notifications.append(data.decode("utf-8", "replace"))
                self._notified.notify_all()

    def wait_notify(self, token, timeout):
        """Wait for a notify datagram carrying `token` (e.g. READY=1). Returns
        False on timeout or when reeld exits first (after draining what it sent)."""
        return self.wait_notify_after(0, lambda line: line == token, timeout) is not None

    def wait_notify_after(self, index, pred, timeout):
        """Wait for a notify datagram, at position `index` or later in self.notifications,
        with a line for which pred(line) holds. Returns that line, or None on timeout/exit."""
        deadline = time.monotonic() + timeout
        exited_at = None
        with self._notified:
            while True:
                for m in self.notifications[index:]:
                    for line in m.split("\n"):
                        if pred(line):
                            return line
                index = len(self.notifications)
                now = time.monotonic()
                if self.proc.poll() is not None:
                    # reeld is gone: give the reader a moment to drain what it sent, then stop
                    # (even with timeout 0: what reeld sent before exiting counts).
                    exited_at = exited_at or now
                    if now - exited_at > 0.2:
                        return None
                elif now >= deadline:
                    return None
                # Woken by each datagram; the 0.1 s cap only notices reeld's exit.
                self._notified.wait(max(0.0, min(deadline - now, 0.1)) if exited_at is None else 0.05)

    def ctl(self, *args, expect_ok=True, prefix=()):
        """prefix: argv to run reelctl under (e.g. setpriv to act as another user)."""
        argv = [*prefix, os.path.join(self.bindir, "reelctl"), "--socket", self.socket, *args]
        t0 = time.monotonic()
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=CTL_TIMEOUT)
        t1 = time.monotonic()
        c = Ctl(tuple(args), p.returncode, p.stdout.decode(), p.stderr.decode(), t0, t1)
        self.ctl_log.append(c)
        print(f"[{t0:.3f}] {c}")
        if expect_ok:
            assert c.rc == 0, f"{c}\n{self.log_tail()}"
        return c

    def status(self):
        c = self.ctl("status", "--json")
        try:
            return json.loads(c.out)
        except ValueError:
            raise AssertionError(f"status --json is not JSON: {c.out!r}")

    def terminate(self, sig=signal.SIGTERM, timeout=EXIT_TIMEOUT):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"reeld did not exit within {timeout} s of {sig!r}\n{self.log_tail()}")
        self.returncode = self.proc.returncode
        return self.returncode

    def log_tail(self, lines=60):
        self.log.flush()
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return "(no reeld log)"
        return "---- reeld log (last %d lines) ----\n%s" % (lines, "\n".join(text[-lines:]))

    def close(self, keep=False):
        try:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        finally:
            try:
                self.notify.shutdown(socket.SHUT_RDWR)  # wakes the reader thread
            except OSError:
                pass
            self._reader.join(5)
            self.notify.close()
            self.log.close()
            if not keep:
                shutil.rmtree(self.dir, ignore_errors=True)


STATUS_RECORDING = re.compile(r"STATUS=recording (\d+):(\d\d):(\d\d), (\d+) segments?")


def recorded(line):
    """(seconds recorded, segments) of a STATUS= line of a recording; None for any other line."""
    m = STATUS_RECORDING.fullmatch(line)
    if not m:
        return None
    h, mi, se, n = (int(x) for x in m.groups())
    return h * 3600 + mi * 60 + se, n


def recording_for(seconds, segments=1):
    """A wait_notify_after predicate: a STATUS= line of a recording with at least `seconds` recorded
    (and `segments` segments; None: any). reeld refreshes the line once a second from the recorded
    time, which advances in bursts on a busy host, so a given second may never be shown (CI saw
    00:00:02 followed by 00:00:04): tests wait for "at least", never for one second's line."""
    def pred(line):
        r = recorded(line)
        return r is not None and r[0] >= seconds and (segments is None or r[1] == segments)
    return pred


def unit_exposure(unit_file):
    """`systemd-analyze security --offline=yes` of a unit file: (its overall exposure, the whole
    output); the exposure is None when the output has no such line."""
    name = os.path.basename(str(unit_file))
    p = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(unit_file)],
                       capture_output=True, text=True, timeout=60)
    m = re.search(rf"Overall exposure level for {re.escape(name)}: (\d+\.\d+)", p.stdout)
    return (float(m.group(1)) if m else None), p.stdout + p.stderr
