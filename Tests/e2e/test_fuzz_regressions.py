"""The config files `make fuzz` found crashing reeld (Tests/fuzz/config/crash-*: toml++ aborted
on malformed TOML; an overflow trap in the fps check; a key cut at a NUL), read by the real
binary: `reeld --check-config` must refuse each with exit status 1 and a message naming the file
and line, never die of a signal. The unit test ReelFuzzTests replays every fuzz input through
the same loader in-process; this checks the shipped build (release flags, no sanitizer)."""

import glob
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
CRASHES = sorted(glob.glob(os.path.join(HERE, "..", "fuzz", "config", "crash-*")))


def test_there_are_crash_inputs():
    assert len(CRASHES) >= 8, CRASHES


def test_check_config_refuses_each_crash_input_with_a_message(reel_bin_dir):
    for path in CRASHES:
        r = subprocess.run([os.path.join(reel_bin_dir, "reeld"), "--check-config", "--config", path],
                           capture_output=True, text=True, timeout=30, env={**os.environ, "SWIFT_BACKTRACE": "enable=no"})
        assert r.returncode == 1, f"{path}: exit status {r.returncode}\n{r.stderr[-2000:]}"
        assert re.search(re.escape(path) + r":\d+: \S", r.stderr), f"{path}: {r.stderr}"
