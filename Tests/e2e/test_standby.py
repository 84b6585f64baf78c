"""Standby (warm devices) and snapshots through the real binaries, on the synthetic sources.

Every claim is read from what the outputs contain: the timecode strip of the decoded
recording and of each decoded JPEG (shared/test-sources.md) says which source frame it is;
the synthetic source captures frame n at exactly T0 + n/fps on CLOCK_MONOTONIC, and T0 is
found from one snapshot (its strip and its `capturedNs`). The host's CLOCK_MONOTONIC brackets
each reelctl call, so reeld's own `startNs` is checked against the client's clock too.
(On vivid and snd-aloop: Tests/vm/test_controls_vm.py.)"""

import json
import os
import subprocess
import time

import numpy as np
import pytest

from synth import read_strip

W, H, FPS = 320, 180, 30
FRAME_NS = 1_000_000_000 // FPS


def frame_of(ms):
    n = -(-ms * FPS // 1000)  # ceil
    assert (n * 1000) // FPS == ms, f"timecode {ms} ms is no frame's at {FPS} fps (a misread strip)"
    return n


def gray(path, w, h):
    raw = subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-fps_mode", "passthrough",
                          "-f", "rawvideo", "-pix_fmt", "gray", "-"], check=True, capture_output=True).stdout
    n = len(raw) // (w * h)
    assert n * w * h == len(raw) and n > 0, (len(raw), w, h)
    return np.frombuffer(raw, np.uint8).reshape(n, h, w).astype(np.float64)


def snapshot(r, path, *extra):
    t0 = time.monotonic_ns()
    c = r.ctl("snapshot", "-o", str(path), "--json", *extra)
    t1 = time.monotonic_ns()
    info = json.loads(c.out)
    assert info["file"] == str(path) and os.path.getsize(path) == info["bytes"], info
    y = gray(str(path), info["width"], info["height"])
    assert y.shape[0] == 1
    return info, frame_of(read_strip(y[0])), t0, t1


def wait_warm(r):
    deadline = time.monotonic() + 10
    while True:
        st = r.status()
        if st["standby"] == "warm":
            return st
        assert time.monotonic() < deadline, st
        time.sleep(0.05)


@pytest.mark.serial
def test_standby_starts_on_the_next_frame_and_snapshots_show_the_current_one(reeld, tmp_path, note):
    r = reeld("standby", size=f"{W}x{H}", fps=str(FPS), preset="ultrafast", standby="true")
    st = wait_warm(r)
    assert st["state"] == "idle" and st["lastError"] is None, st
    # Idle, warm: the next frame, at once. Its strip and capture time give the source's T0.
    info, n0, a, b = snapshot(r, tmp_path / "idle.jpg")
    t0 = info["capturedNs"] - n0 * 10**9 // FPS  # frame n is captured at T0 + n/fps (to the ns)
    assert a - FRAME_NS <= info["capturedNs"] <= b, (a, info, b)
    assert b - a < 100_000_000 + 60_000_000, f"idle snapshot took {(b - a) / 1e6:.1f} ms including reelctl's start-up"
    nothing_idle = r.status()
    assert nothing_idle["frames"] == 0 and nothing_idle["bytesWritten"] is None and os.listdir(r.out_dir) == [], nothing_idle

    sa = time.monotonic_ns()
    c = r.ctl("start", "--name", "warm", "--json")
    sb = time.monotonic_ns()
    start_ns = json.loads(c.out)["startNs"]
    assert sa <= start_ns <= sb, (sa, start_ns, sb)
    time.sleep(1.0)
    rec, n_rec, ra, rb = snapshot(r, tmp_path / "recording.jpg")
    origin = r.status()["originNs"]
    r.ctl("pause")
    time.sleep(0.5)
    paused, n_paused, pa, pb = snapshot(r, tmp_path / "paused.jpg", "--width", "160")
    assert (paused["width"], paused["height"]) == (160, 90), paused
    time.sleep(0.3)
    r.ctl("resume")
    time.sleep(0.7)
    stop = r.ctl("stop").out.strip()

    y = gray(stop, W, H)
    frames = [frame_of(read_strip(f)) for f in y]
    first = frames[0]
    captured = t0 + first * 10**9 // FPS
    latency = captured - start_ns
    note(f"standby: first recorded frame captured {latency / 1e6:.2f} ms after the start request reached reeld "
         f"(limit one frame + 5 ms = {(FRAME_NS + 5_000_000) / 1e6:.1f} ms); recording snapshot: frame {n_rec}, "
         f"request bracket {(ra - t0) * FPS / 1e9:.1f}..{(rb - t0) * FPS / 1e9:.1f} (frames)")
    # Nothing captured before the start instant; the frame after it is the first.
    assert 0 <= latency <= FRAME_NS + 5_000_000, (latency, frames[:5])
    assert captured - FRAME_NS < start_ns
    assert sa <= captured <= sb + FRAME_NS + 5_000_000
    # status's originNs is that first frame's capture instant (to the ns T0's estimate rounds to).
    assert abs(origin - captured) <= 2, (origin, captured)
    # The snapshot while recording is the frame being recorded then: within two frames of the
    # request, and in the file.
    cap = t0 + n_rec * 10**9 // FPS
    assert ra - 2 * FRAME_NS <= cap <= rb + 2 * FRAME_NS, (ra, cap, rb)
    assert n_rec in frames, (n_rec, frames[:3], frames[-3:])
    # Paused: the camera's current frame, which the file does not hold.
    cap = t0 + n_paused * 10**9 // FPS
    assert pa - 2 * FRAME_NS <= cap <= pb + 2 * FRAME_NS, (pa, cap, pb)
    assert n_paused not in frames
    # Back to warm: the next start again begins on the frame after its request.
    st = wait_warm(r)
    assert st["state"] == "idle" and st["droppedFrames"] == 0, st
    sa = time.monotonic_ns()
    start_ns = json.loads(r.ctl("start", "--name", "again", "--json").out)["startNs"]
    time.sleep(0.5)
    again = r.ctl("stop").out.strip()
    first = frame_of(read_strip(gray(again, W, H)[0]))
    latency = t0 + first * 10**9 // FPS - start_ns
    assert sa <= start_ns and -1 <= latency <= FRAME_NS + 5_000_000, latency


@pytest.mark.serial
def test_snapshot_without_standby(reeld, tmp_path):
    r = reeld("snapshot-cold", size=f"{W}x{H}", fps=str(FPS), preset="ultrafast")
    st = r.status()
    assert st["standby"] is None, st
    # Idle without standby: reeld opens the source briefly; its first frame.
    info, n, a, b = snapshot(r, tmp_path / "cold.jpg")
    assert (info["width"], info["height"]) == (W, H) and n <= 3, (info, n)
    assert a <= info["capturedNs"] <= b
    sa = time.monotonic_ns()
    c = r.ctl("start", "--name", "cold", "--json")
    sb = time.monotonic_ns()
    start_ns = json.loads(c.out)["startNs"]
    assert sa <= start_ns <= sb, (sa, start_ns, sb)
    time.sleep(0.8)
    rec, n_rec, ra, rb = snapshot(r, tmp_path / "rec.jpg")
    t0 = rec["capturedNs"] - n_rec * 10**9 // FPS
    origin = r.status()["originNs"]
    c = r.ctl("snapshot", "--width", "100000", expect_ok=False)
    assert c.rc == 1 and "bad \"width\": 100000 is out of range 16 to 320" in c.err, c
    c = r.ctl("snapshot", "--width", "8", expect_ok=False)
    assert c.rc == 2 and "--width must be at least 16" in c.err, c
    time.sleep(0.3)
    stop = r.ctl("stop").out.strip()
    frames = [frame_of(read_strip(f)) for f in gray(stop, W, H)]
    assert n_rec in frames
    # Without standby the sources start after the request (the synthetic T0 is when they opened).
    assert t0 >= start_ns and frames[0] <= 1, (t0 - start_ns, frames[:3])
    assert abs(origin - (t0 + frames[0] * 10**9 // FPS)) <= 2, (origin, t0, frames[:3])
    assert ra - 2 * FRAME_NS <= t0 + n_rec * 10**9 // FPS <= rb + 2 * FRAME_NS
    # Scaled: the strip still reads.
    small, n_small, _, _ = snapshot(r, tmp_path / "small.jpg", "--width", "160")
    assert (small["width"], small["height"]) == (160, 90) and n_small <= 3, (small, n_small)


def test_standby_setting(reel_bin_dir):
    reeld_bin = os.path.join(reel_bin_dir, "reeld")
    env = dict(os.environ, REEL_CONFIG="/dev/null")
    p = subprocess.run([reeld_bin, "--check-config", "--standby", "maybe"], capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode != 0 and "invalid --standby: 'maybe' is not true or false" in p.stderr, p.stderr
    p = subprocess.run([reeld_bin, "--check-config", "--standby", "true"], capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode == 0 and "standby = true" in p.stdout, p.stdout
