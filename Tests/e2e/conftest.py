"""Harness for Reel's end-to-end tests: starts the real `reeld`, waits for its
systemd-style READY=1 notification, drives it with `reelctl`, and times every
command on CLOCK_MONOTONIC.

REEL_BIN_DIR must point at the directory holding `reeld` and `reelctl`; tests that
need them skip (with the reason) when it is unset or they are missing."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
for p in (HERE, os.path.join(REPO, "scripts")):
    if p not in sys.path:
        sys.path.insert(0, p)

from reel_harness import Ctl, Reeld  # noqa: E402  (scripts/ is on sys.path above)
from reel_notes import note, summary  # noqa: E402,F401  (note: the fixture)


@pytest.fixture(scope="session")
def reel_bin_dir():
    d = os.environ.get("REEL_BIN_DIR")
    if not d:
        pytest.skip("REEL_BIN_DIR is unset: set it to the directory holding reeld and reelctl")
    missing = [b for b in ("reeld", "reelctl")
               if not os.access(os.path.join(d, b), os.X_OK)]
    if missing:
        pytest.skip(f"REEL_BIN_DIR={d} lacks executable {', '.join(missing)}")
    return d


@pytest.fixture
def reeld(reel_bin_dir, request):
    """reeld(name, **options) starts a daemon (options become --key value; True
    becomes a bare --key) and returns a ready Reeld. Torn down after the test;
    its log is printed (shown by pytest when the test fails). Set REEL_KEEP=1
    to keep the temp dirs (recordings, logs)."""
    started = []

    def start(name, _env=None, _listen_fd=None, _socket_arg=True, **opts):
        r = Reeld(reel_bin_dir, opts, name, env=_env, listen_fd=_listen_fd, socket_arg=_socket_arg)
        started.append(r)
        print("reeld argv:", " ".join(r.argv))
        return r

    yield start
    for r in started:
        try:
            r.terminate(timeout=10)
        except AssertionError as e:
            print(e)
        print(r.log_tail())
        print("notifications:", r.notifications)
        keep = bool(os.environ.get("REEL_KEEP"))
        if keep:
            print("kept:", r.dir)
        r.close(keep=keep)


def pytest_configure(config):
    # `make test` runs the e2e tier two tests at a time (pytest-xdist: most tests wait on
    # real-time schedules), then the tests marked serial alone: those whose assertions are
    # latencies or watchdog deadlines that a second reeld encoding beside them would blur.
    config.addinivalue_line("markers", "serial: a timing assertion; run alone, after the parallel part")



def pytest_terminal_summary(terminalreporter, exitstatus, config):
    summary(terminalreporter, "reel e2e measurements")
