"""Live preview and levels (issue 24) through the real reeld on its synthetic sources.

What the frames show is read from the frames: the timecode strip of each decoded JPEG
(shared/test-sources.md) says which source frame it is, so a frame that moves is one whose strip
moved, by as much as its `capturedNs` did. Levels follow the test source's beep (0.5 amplitude,
1 kHz, the first 100 ms of each second k >= 1; silence otherwise). Rates are counted over a few
seconds with generous bounds (the machine is shared). Waits are for lines, with timeouts."""

import base64
import json
import os
import socket
import subprocess
import time

import numpy as np
import pytest

from synth import read_strip

W, H, FPS = 640, 360, 30


class Stream:
    """A raw control connection turned into a `preview` or `levels` stream."""

    def __init__(self, r, **request):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(r.socket)
        self.sock.settimeout(10)
        self.file = self.sock.makefile("rb")
        self.sock.sendall((json.dumps({"v": 1, "id": 1, **request}) + "\n").encode())
        self.reply = json.loads(self.file.readline())

    def line(self):
        raw = self.file.readline()
        assert raw, "reeld closed the stream"
        return json.loads(raw)

    def frames(self, seconds):
        """The preview lines that arrive in `seconds` (state lines are skipped)."""
        end = time.monotonic() + seconds
        out = []
        while time.monotonic() < end:
            line = self.line()
            if line["event"] == "preview":
                out.append(line)
        return out

    def until(self, pred, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            line = self.line()
            if pred(line):
                return line
        raise AssertionError(f"no such line within {timeout} s")

    def close(self):
        self.file.close()
        self.sock.close()


def decode(line):
    """The frame's luma, decoded by ffmpeg from the line's JPEG (which must be one of its size)."""
    jpeg = base64.b64decode(line["jpeg"])
    assert len(jpeg) == line["bytes"] and jpeg[:2] == b"\xff\xd8" and jpeg[-2:] == b"\xff\xd9", line["bytes"]
    w, h = line["width"], line["height"]
    raw = subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-f", "jpeg_pipe", "-i", "-", "-f", "rawvideo",
                          "-pix_fmt", "gray", "-"], input=jpeg, check=True, capture_output=True).stdout
    assert len(raw) == w * h, (len(raw), w, h)
    return np.frombuffer(raw, np.uint8).reshape(h, w).astype(np.float64)


def check_frames(frames, width, fps, seconds, what):
    """Frames of `width` at about `fps` whose picture moves as their capture instants do."""
    assert frames, f"{what}: no preview frame in {seconds} s"
    n = len(frames)
    # Frames read in `seconds` (some may have waited in the socket's buffer while the test did
    # other things), and their rate by capture time.
    assert n >= 0.6 * fps * seconds, f"{what}: {n} frames in {seconds} s at {fps} fps"
    # Frames this reader missed (it decodes between reads: latest wins) count as sent.
    sent = n - 1 + sum(f["dropped"] for f in frames[1:])
    rate = sent * 1e9 / (frames[-1]["capturedNs"] - frames[0]["capturedNs"])
    gaps = sorted({(b["capturedNs"] - a["capturedNs"]) // 1_000_000 for a, b in zip(frames, frames[1:])})
    assert 0.8 * fps <= rate <= 1.05 * fps, f"{what}: {rate:.2f} frames a second of capture time, asked {fps}; gaps {gaps} ms"
    for f in frames:
        assert (f["width"], f["height"]) == (width, width * H // W), f
    codes = [read_strip(decode(f)) for f in frames[:: max(1, n // 6)]]
    times = [f["capturedNs"] for f in frames[:: max(1, n // 6)]]
    for (c0, t0), (c1, t1) in zip(zip(codes, times), zip(codes[1:], times[1:])):
        # The strip moved by what the capture instants did (one frame of slack for the grid).
        assert abs((c1 - c0) - (t1 - t0) / 1e6) <= 1000 / FPS + 1, (what, codes, times)
        assert c1 > c0, (what, codes)
    seqs = [f["seq"] for f in frames]
    for a, b in zip(frames, frames[1:]):
        assert b["seq"] == a["seq"] + 1 + b["dropped"], (a["seq"], b["seq"], b["dropped"])
        assert b["capturedNs"] > a["capturedNs"]
    return seqs


def wait_warm(r):
    deadline = time.monotonic() + 10
    while r.status()["standby"] != "warm":
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_preview_while_idle_with_standby_recording_and_paused(reeld, note):
    r = reeld("preview", size=f"{W}x{H}", fps=str(FPS), preset="ultrafast", standby="true")
    wait_warm(r)
    s = Stream(r, cmd="preview", width=320, fps=10)
    assert s.reply["ok"] and s.reply["subscribed"], s.reply
    assert s.reply["preview"] == {"width": 320, "height": 180, "fps": 10}, s.reply
    check_frames(s.frames(3), 320, 10, 3, "idle with standby")
    r.ctl("start", "--name", "pv")
    check_frames(s.frames(3), 320, 10, 3, "recording")
    r.ctl("pause")
    check_frames(s.frames(2), 320, 10, 2, "paused")
    r.ctl("resume")
    frames = s.frames(2)
    check_frames(frames, 320, 10, 2, "resumed")
    st = r.status()
    assert st["droppedFrames"] == 0, st
    r.ctl("stop")
    check_frames(s.frames(2), 320, 10, 2, "idle again")
    note(f"preview 320 px at 10 fps: {sum(len(base64.b64decode(f['jpeg'])) for f in frames) // len(frames)} bytes a frame")
    s.close()


def test_preview_width_limits_and_the_ninth_subscriber(reeld):
    r = reeld("limits", size=f"{W}x{H}", fps=str(FPS), standby="true", **{"preview-max-fps": "12"})
    wait_warm(r)
    wide = Stream(r, cmd="preview", width=800)
    assert not wide.reply["ok"] and wide.reply["error"]["code"] == "bad_request", wide.reply
    assert "the camera's width" in wide.reply["error"]["message"], wide.reply
    fast = Stream(r, cmd="preview", fps=13)
    assert fast.reply["error"]["code"] == "bad_request" and "preview_max_fps" in fast.reply["error"]["message"], fast.reply
    streams = [Stream(r, cmd="preview", width=160, fps=5) for _ in range(8)]
    assert all(s.reply["ok"] for s in streams), [s.reply for s in streams]
    ninth = Stream(r, cmd="preview")
    assert not ninth.reply["ok"] and ninth.reply["error"]["code"] == "busy", ninth.reply
    first = streams[0].until(lambda l: l["event"] == "preview")
    assert first["width"] == 160 and first["height"] == 90, first
    streams.pop().close()
    again = Stream(r, cmd="preview", width=160, fps=5)
    assert again.reply["ok"], again.reply
    for s in streams + [wide, fast, ninth, again]:
        s.close()


def test_a_preview_reader_that_stops_reading_delays_neither_status_nor_the_recording(reeld, note):
    r = reeld("slow", size=f"{W}x{H}", fps=str(FPS), preset="ultrafast")
    r.ctl("start", "--name", "slow")
    s = Stream(r, cmd="preview", width=640, fps=15)
    assert s.reply["preview"]["height"] == 360, s.reply
    s.until(lambda l: l["event"] == "preview")
    # Now read nothing for 2 s: the frames pile up nowhere but in the socket's buffer.
    worst = 0.0
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        c = r.ctl("status", "--json")
        worst = max(worst, c.t1 - c.t0)
    frames = s.frames(1.5)
    missed = sum(f["dropped"] for f in frames)
    st = r.status()
    r.ctl("stop")
    note(f"a preview reader paused 2 s: status took at most {worst * 1000:.0f} ms (reelctl's start-up included); "
         f"it missed {missed} frames; the recording dropped {st['droppedFrames']}")
    assert worst < 1.0, worst
    assert missed > 0, "the reader fell behind: frames are dropped for it, latest wins"
    assert st["droppedFrames"] == 0 and st["frames"] > 0, st
    s.close()


def test_without_a_camera_the_stream_says_why_until_frames_come(reeld):
    r = reeld("nocam", size=f"{W}x{H}", fps=str(FPS), preset="ultrafast")  # standby off
    s = Stream(r, cmd="preview", width=320, fps=5)
    assert s.reply["ok"] and s.reply["preview"] == {"width": 320, "height": 0, "fps": 5}, s.reply
    off = s.until(lambda l: l["event"] == "preview_state")
    assert off["live"] is False and "standby" in off["reason"], off
    r.ctl("start", "--name", "nocam")
    on = s.until(lambda l: l["event"] == "preview_state")
    assert on["live"] is True and "reason" not in on, on
    frame = s.until(lambda l: l["event"] == "preview")
    assert (frame["width"], frame["height"]) == (320, 180), frame
    r.ctl("stop")
    again = s.until(lambda l: l["event"] == "preview_state")
    assert again["live"] is False, again
    s.close()


def test_levels_follow_the_beeps(reeld, note):
    r = reeld("levels", size="320x180", fps="30", standby="true")
    wait_warm(r)
    s = Stream(r, cmd="levels")
    assert s.reply == {"v": 1, "id": 1, "ok": True, "subscribed": True}, s.reply
    lines = [s.line() for _ in range(70)]  # 3.5 s of audio
    assert all(l["event"] == "levels" and len(l["peakDbfs"]) == 1 == len(l["rmsDbfs"]) for l in lines), lines[0]
    times = [l["capturedNs"] for l in lines]
    steps = {b - a for a, b in zip(times, times[1:])}
    assert steps <= {50_000_000}, f"one line per 50 ms of audio, none missed by a reader that keeps up: {sorted(steps)[:5]}"
    loud = [l for l in lines if l["peakDbfs"][0] > -20]
    quiet = [l for l in lines if l["peakDbfs"][0] <= -20]
    # A beep is 100 ms: two windows a second (three when a window straddles its edge).
    assert 4 <= len(loud) <= 12, [l["peakDbfs"] for l in lines]
    assert all(abs(l["peakDbfs"][0] + 6.0) <= 0.5 for l in loud if l["rmsDbfs"][0] > -9.5), loud
    assert all(l["peakDbfs"][0] == -120.0 and l["rmsDbfs"][0] == -120.0 for l in quiet), quiet
    # Beeps are a second apart on the audio's own clock.
    onsets = [l["capturedNs"] for i, l in enumerate(lines) if l in loud and (i == 0 or lines[i - 1] not in loud)]
    assert len(onsets) >= 3 and all(abs((b - a) - 1_000_000_000) <= 50_000_000 for a, b in zip(onsets, onsets[1:])), onsets
    note(f"levels: {len(loud)} of {len(lines)} windows loud, peak {max(l['peakDbfs'][0] for l in loud)} dBFS, "
         f"latency (at - capturedNs) {max(l['at'] - l['capturedNs'] for l in lines) / 1e6:.0f} ms at most")
    s.close()
    # reelctl's own: lines while recording too.
    r.ctl("start", "--name", "lv")
    c = r.ctl("levels", "--count", "5")
    got = [json.loads(x) for x in c.out.splitlines()]
    assert len(got) == 5 and all(g["event"] == "levels" for g in got), c.out
    r.ctl("stop")


def test_reelctl_preview_saves_frames(reeld, tmp_path):
    r = reeld("ctlpv", size=f"{W}x{H}", fps=str(FPS), standby="true")
    wait_warm(r)
    c = r.ctl("preview", "--out", str(tmp_path), "--count", "4", "--width", "160", "--fps", "5")
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 4 and len(c.out.splitlines()) == 4, (files, c.out)
    for name in files:
        data = (tmp_path / name).read_bytes()
        assert data[:2] == b"\xff\xd8", name
    bad = r.ctl("preview", "--out", str(tmp_path), "--count", "1", "--width", "1000", expect_ok=False)
    assert bad.rc == 1 and "the camera's width" in bad.err, bad
