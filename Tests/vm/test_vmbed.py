"""The host-side helpers of the VM tier on known signals (no VM): the step-tone analysis that
VM scenarios use to check that a recording holds the played seconds with the paused spans
cut out, including after an AAC round trip."""

import os
import subprocess

import numpy as np
import pytest

import vmbed

RATE = 48000
OFFSET = 0.37                       # tone time when the "recording" starts
PAUSES = [(1.2, 1.9), (3.3, 5.1)]   # source seconds after start
END = 6.4


def recorded(tone, pauses=PAUSES, end=END, offset=OFFSET):
    spans = list(zip([0.0] + [r for _, r in pauses], [p for p, _ in pauses] + [end]))
    return np.concatenate([tone[int(round((offset + a) * RATE)):int(round((offset + b) * RATE))]
                           for a, b in spans])


def test_step_runs_follow_a_schedule():
    x = recorded(vmbed.step_tone(8, RATE))
    got = vmbed.step_runs(x, RATE)
    off = vmbed.tone_offset_from_runs(got)
    assert abs(off - OFFSET) < 0.006, off
    want = vmbed.expected_step_runs(off, PAUSES, END)
    print(got, want, sep="\n")
    assert [r[2] for r in want] == [0, 1, 2, 3, 5, 6], want
    assert not vmbed.compare_step_runs(got, want, 0.02)


def test_a_pause_that_was_not_cut_is_found():
    tone = vmbed.step_tone(8, RATE)
    x = recorded(tone, pauses=[(1.2, 1.9)])            # the second pause kept its audio
    got = vmbed.step_runs(x, RATE)
    want = vmbed.expected_step_runs(vmbed.tone_offset_from_runs(got), PAUSES, END)
    assert vmbed.compare_step_runs(got, want, 0.02)


def test_a_short_pause_is_measured():
    x = recorded(vmbed.step_tone(8, RATE), pauses=[(1.2, 1.9), (3.3, 3.45)])
    got = vmbed.step_runs(x, RATE)
    off = vmbed.tone_offset_from_runs(got)
    assert not vmbed.compare_step_runs(got, vmbed.expected_step_runs(off, [(1.2, 1.9), (3.3, 3.45)], END), 0.02)
    # 150 ms not cut: the boundaries after it are off by more than the tolerance
    assert vmbed.compare_step_runs(got, vmbed.expected_step_runs(off, [(1.2, 1.9)], END), 0.02)


@pytest.mark.skipif(not os.path.exists("/usr/bin/ffmpeg"), reason="needs ffmpeg")
def test_step_runs_survive_aac(tmp_path):
    x = recorded(vmbed.step_tone(8, RATE))
    src, m4a, dec = (str(tmp_path / n) for n in ("in.wav", "a.m4a", "out.wav"))
    vmbed.write_wav(src, x, RATE)
    for argv in (["-i", src, "-c:a", "aac", "-b:a", "128k", m4a], ["-i", m4a, dec]):
        subprocess.run(["ffmpeg", "-v", "error", "-y", *argv], check=True)
    y, rate = vmbed.read_wav(dec)
    got = vmbed.step_runs(y, rate)
    off = vmbed.tone_offset_from_runs(got)
    assert abs(off - OFFSET) < 0.01, off
    assert not vmbed.compare_step_runs(got, vmbed.expected_step_runs(off, PAUSES, END), 0.025)


def test_copy_over_replaces_what_the_root_has(tmp_path):
    """The systemd scenario copies Debian's unpacked udev over the host's root, which has udev's
    files already when the host has udev installed: files and links are replaced, not refused
    (busybox cp refused with "File exists" and the scenario failed on such hosts)."""
    src, root = tmp_path / "udev", tmp_path / "root"
    for d in (src / "usr/lib/systemd/system/sockets.target.wants", root / "usr/lib/systemd/system/sockets.target.wants"):
        d.mkdir(parents=True)
    (src / "usr/lib/systemd/systemd-udevd").write_text("new")
    (src / "usr/lib/systemd/system/sockets.target.wants/udevd.socket").symlink_to("../udevd.socket")
    (src / "usr/lib/new-only").write_text("n")
    (root / "usr/lib/systemd/systemd-udevd").write_text("old")
    (root / "usr/lib/systemd/system/sockets.target.wants/udevd.socket").symlink_to("../old.socket")
    (root / "usr/lib/host-only").write_text("h")
    lib = os.path.join(os.path.dirname(__file__), "..", "..", "scripts/vm/guest/lib.sh")
    # lib.sh makes /run/reel; the function alone is what is under test
    fn = subprocess.run(["sed", "-n", "/^copy_over()/,/^}/p", lib], stdout=subprocess.PIPE, text=True, check=True).stdout
    assert fn.strip(), "copy_over not found in guest/lib.sh"
    p = subprocess.run(["busybox", "sh", "-ec", fn + f'\ncopy_over "{src}" "{root}"'],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.returncode == 0, p.stdout
    assert (root / "usr/lib/systemd/systemd-udevd").read_text() == "new"
    assert os.readlink(root / "usr/lib/systemd/system/sockets.target.wants/udevd.socket") == "../udevd.socket"
    assert (root / "usr/lib/new-only").read_text() == "n"
    assert (root / "usr/lib/host-only").read_text() == "h"
