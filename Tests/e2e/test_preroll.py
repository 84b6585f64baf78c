"""Pre-roll (issue 25, part 1): with standby, `start` records from S seconds before its request
reached reeld, through the real binaries on the synthetic sources.

Every claim is read from the output: the timecode strip of the decoded file says which source
frame each is; the synthetic source captures frame n at exactly T0 + n/fps on CLOCK_MONOTONIC,
and T0 comes from one idle snapshot (its strip and its `capturedNs`). The request instant is
reeld's (`startNs + preRollNs` of the reply), bracketed by the client's CLOCK_MONOTONIC around
the reelctl call. Flash/beep sync and the rest of what holds for every recording are
reel_verify's. Sleeps only shape the schedule; waits for the pre-roll poll `status`."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

import reel_verify as rv
from synth import read_strip
from test_record import sleep_until
from test_standby import gray, wait_warm

S = 1.5
S_NS = 1_500_000_000


def frame_n(ms, fps):
    n = -(-ms * fps // 1000)  # ceil
    assert (n * 1000) // fps == ms, f"timecode {ms} ms is no frame's at {fps} fps (a misread strip)"
    return n


def source_t0(r, tmp_path, fps):
    """T0 of the warm synthetic source on CLOCK_MONOTONIC (frame n at T0 + n/fps), from a snapshot."""
    path = tmp_path / "t0.jpg"
    info = json.loads(r.ctl("snapshot", "-o", str(path), "--json").out)
    y = gray(str(path), info["width"], info["height"])
    n = frame_n(read_strip(y[0]), fps)
    return info["capturedNs"] - n * 10**9 // fps


def wait_preroll(r, want_ns=S_NS, timeout=15):
    """Idle and warm, holding the whole pre-roll (status says what a start would get)."""
    wait_warm(r)
    deadline = time.monotonic() + timeout
    while True:
        st = r.status()
        if st["preRollNs"] == want_ns:
            return st
        assert st["preRollNs"] is not None and 0 <= st["preRollNs"] < want_ns, st
        assert time.monotonic() < deadline, st
        time.sleep(0.1)


def start(r, *extra):
    sa = time.monotonic_ns()
    c = r.ctl("start", "--json", *extra)
    sb = time.monotonic_ns()
    reply = json.loads(c.out)
    return reply, sa, sb, c


def captured_ns(t0, ms, fps):
    return t0 + frame_n(ms, fps) * 10**9 // fps


def problems(rep, allow_late_start=True):
    """reel_verify's defects but the first frame's source time, which with standby is the warm
    source's (it was started long before the recording)."""
    return [d for d in rv.defects(rep) if not (allow_late_start and d.startswith("first frame's source time"))]


def reeld_preroll(reeld, name, size="640x360", fps=30, rate=48000, channels=1, **opts):
    return reeld(name, size=size, fps=fps, standby="true", **{"pre-roll": str(S), "sample-rate": rate,
                                                                                   "channels": channels}, **opts)


CASES = [
    pytest.param("640x360", 30, 48000, 1, id="640x360-30fps-48k-mono"),
    pytest.param("320x180", 15, 44100, 2, id="320x180-15fps-44k1-stereo"),
]


@pytest.mark.parametrize("size,fps,rate,channels", CASES)
def test_preroll_starts_s_before_the_request_in_sync_dropping_nothing(reeld, tmp_path, note, size, fps, rate, channels):
    name = f"pre-{size}-{fps}"
    r = reeld_preroll(reeld, name, size, fps, rate, channels)
    wait_preroll(r)
    t0 = source_t0(r, tmp_path, fps)
    reply, sa, sb, c = start(r, "--name", name)
    assert reply["preRollNs"] == S_NS, reply
    request = reply["startNs"] + reply["preRollNs"]
    assert sa <= request <= sb, (sa, request, sb)
    time.sleep(2.5)
    st = r.status()
    assert st["state"] == "recording" and st["droppedFrames"] == 0 and st["preRollNs"] == 0, st
    ta = time.monotonic_ns()
    stop = r.ctl("stop").out.strip()
    again = r.status()
    tb = time.monotonic_ns()
    rep = rv.analyze(stop)
    print(rv.format_report(rep))
    frame = 10**9 // fps
    first = captured_ns(t0, rep["segments"][0]["first_ms"], fps)
    # The first frame is the first captured at or after S before the request: within one frame.
    lead = request - first
    note(f"pre-roll {size} {fps} fps {rate} Hz {channels} ch: first frame captured {lead / 1e6:.2f} ms before the "
         f"request reached reeld (S = {S * 1000:.0f} ms, one frame {frame / 1e6:.1f} ms); "
         f"sync max {rep['sync']['max_abs_offset_ms']} ms over {len(rep['sync']['pairs'])} pairs")
    assert 0 <= first - reply["startNs"] < frame, (first, reply["startNs"])
    assert S_NS - frame < lead <= S_NS, lead
    # The client's clock agrees: the request reached reeld inside its reelctl call.
    assert sa - S_NS - frame < first <= sb - S_NS + frame
    assert st["originNs"] is not None and abs(st["originNs"] - first) <= 2, (st["originNs"], first)
    # One continuous segment (a dropped frame would show as a jump), in sync, nothing dropped.
    assert len(rep["segments"]) == 1 and not rep["jumps"], rep["segments"]
    assert len(rep["sync"]["pairs"]) >= 3, rep["sync"]
    assert not problems(rep), problems(rep)
    assert r.status()["droppedFrames"] == 0
    log = r.log_tail(400)
    assert "video frame(s) dropped" not in log and f"{rep['video']['frame_count']} frames, 0 dropped)" in log, log
    # Back to warm: the pre-roll fills again from the recording's end, never before it.
    assert again["preRollNs"] is not None and again["preRollNs"] <= tb - ta, (again, tb - ta)


def test_preroll_counts_toward_the_length_cap(reeld, tmp_path, note):
    fps = 30
    r = reeld_preroll(reeld, "cap")
    wait_preroll(r)
    t0 = source_t0(r, tmp_path, fps)
    reply, sa, sb, _ = start(r, "--name", "cap", "--max-duration", "2.5")
    # The cap stops it 1 s after the request: 1.5 s of pre-roll and 1 s after.
    deadline = time.monotonic() + 10
    while r.status()["state"] != "idle":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    final = os.path.join(r.out_dir, "cap.mp4")
    rep = rv.analyze(final)
    v = rep["video"]
    assert v["frame_count"] == 75, v["frame_count"]  # 2.5 s at 30 fps, to the frame
    first = captured_ns(t0, rep["segments"][0]["first_ms"], fps)
    assert 0 <= first - reply["startNs"] < 10**9 // fps
    assert reply["startNs"] + S_NS == reply["startNs"] + reply["preRollNs"]
    assert not problems(rep), problems(rep)
    assert "reached its length cap of 00:00:02.500" in r.log_tail(200)


def test_undo_of_the_first_take_removes_the_preroll_and_resume_brings_back_nothing(reeld, tmp_path, note):
    fps = 30
    r = reeld_preroll(reeld, "undo")
    wait_preroll(r)
    t0 = source_t0(r, tmp_path, fps)
    reply, _, _, s = start(r, "--name", "undo")
    sleep_until(s.mid + 0.8)
    r.ctl("pause")
    r.ctl("undo")
    assert r.status()["takes"] == [], r.status()
    sleep_until(s.mid + 1.5)
    ra = time.monotonic_ns()
    r.ctl("resume")
    rb = time.monotonic_ns()
    sleep_until(s.mid + 2.5)
    pa = time.monotonic_ns()
    r.ctl("pause")
    pb = time.monotonic_ns()
    sleep_until(s.mid + 3.5)
    qa = time.monotonic_ns()
    r.ctl("resume")
    qb = time.monotonic_ns()
    sleep_until(s.mid + 4.3)
    final = r.ctl("stop").out.strip()
    rep = rv.analyze(final)
    print(rv.format_report(rep))
    frame = 10**9 // fps
    segs = rep["segments"]
    assert len(segs) == 2, segs
    # Take 1 and its pre-roll are gone: the file starts at the resume (the frame after it), not before.
    first = captured_ns(t0, segs[0]["first_ms"], fps)
    assert ra - frame <= first <= rb + frame, ((first - ra) / 1e6, (rb - ra) / 1e6)
    # The resume after a pause brings back nothing from the pause: the second segment begins at
    # its resume, the first ends at the pause.
    end1 = captured_ns(t0, segs[0]["last_ms"], fps)
    start2 = captured_ns(t0, segs[1]["first_ms"], fps)
    assert pa - 2 * frame <= end1 <= pb + frame, ((end1 - pa) / 1e6, (pb - pa) / 1e6)
    assert qa - frame <= start2 <= qb + frame, ((start2 - qa) / 1e6, (qb - qa) / 1e6)
    assert not problems(rep), problems(rep)


def check_config(reel_bin_dir, *args):
    env = dict(os.environ, REEL_CONFIG="/dev/null")
    return subprocess.run([os.path.join(reel_bin_dir, "reeld"), "--check-config", "--video", "test", "--audio", "test", *args],
                          capture_output=True, text=True, env=env, timeout=30)


def test_preroll_refusals(reel_bin_dir, reeld):
    p = check_config(reel_bin_dir, "--pre-roll", "1.5")
    assert p.returncode == 1 and "pre_roll 1.5 s needs standby = true" in p.stderr and "turn standby on" in p.stderr, p.stderr
    p = subprocess.run([os.path.join(reel_bin_dir, "reeld"), "--check-config", "--video", "test", "--audio", "test"],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, REEL_CONFIG="/dev/null", REEL_PRE_ROLL="2", REEL_STANDBY="false"))
    assert p.returncode == 1 and "REEL_PRE_ROLL" in p.stderr and "turn standby on" in p.stderr, p.stderr
    # 10 s of 1280x720 YUYV at 30 fps: 316 frames of 1.84 MB, and the audio.
    p = check_config(reel_bin_dir, "--standby", "true", "--pre-roll", "10", "--size", "1280x720")
    m = re.search(r"pre_roll 10 s needs (\d+) MB of raw frames and audio at this size and frame rate, more than pre_roll_max_mb 256 MB", p.stderr)
    assert p.returncode == 1 and m and int(m.group(1)) == 584, p.stderr
    assert "raise pre_roll_max_mb to at least 584" in p.stderr, p.stderr
    p = check_config(reel_bin_dir, "--standby", "true", "--pre-roll", "10", "--size", "1280x720", "--pre-roll-max-mb", "600")
    assert p.returncode == 0 and 'pre_roll = "10"' in p.stdout, (p.stdout, p.stderr)
    p = check_config(reel_bin_dir, "--standby", "true", "--pre-roll", "1.2345")
    assert p.returncode != 0 and "3 decimals" in p.stderr, p.stderr
    # A start asking for more than what standby keeps is a bad_request naming both figures.
    r = reeld_preroll(reeld, "refuse")
    wait_warm(r)
    c = r.ctl("start", "--pre-roll", "2", expect_ok=False)
    assert c.rc == 1 and "a pre-roll of 2 s is more than the configured pre_roll of 1.5 s" in c.err, c
    assert r.status()["state"] == "idle"
    c = r.ctl("start", "--pre-roll", "1.2345", expect_ok=False)
    assert c.rc == 2 and "--pre-roll" in c.err, c
    # Less than configured is fine: that much.
    wait_preroll(r)
    reply, _, _, _ = start(r, "--pre-roll", "0.5")
    assert reply["preRollNs"] == 500_000_000, reply
    ta = time.monotonic_ns()
    r.ctl("stop")
    # At once again: only what was captured since the last recording ended, never before; the
    # reply and the log say how much.
    reply, sa, sb, _ = start(r)
    request = reply["startNs"] + reply["preRollNs"]
    assert sa <= request <= sb and 0 <= reply["preRollNs"] <= request - ta < S_NS, (reply, request - ta)
    assert re.search(r"pre-roll: [0-9.]+ s of the 1\.5 s asked", r.log_tail(30)), r.log_tail(30)
    r.ctl("stop")


def test_sighup_refuses_a_preroll_without_standby(reeld, tmp_path):
    cfg = tmp_path / "reeld.toml"
    cfg.write_text('standby = true\npre_roll = "1.5"\n')
    r = reeld("hup", config=str(cfg))
    wait_preroll(r)
    cfg.write_text('standby = false\npre_roll = "1.5"\n')
    r.proc.send_signal(signal.SIGHUP)
    assert r.wait_notify("RELOADING=1", 5), r.log_tail()
    deadline = time.monotonic() + 5
    while "SIGHUP: configuration not reloaded" not in r.log_tail(50):
        assert time.monotonic() < deadline, r.log_tail()
        time.sleep(0.05)
    log = r.log_tail(50)
    assert "pre_roll 1.5 s needs standby = true" in log and "turn standby on" in log, log
    # The old configuration stays: standby warm, the pre-roll held.
    assert r.status()["preRollNs"] == S_NS


def request(r, obj):
    """One request line on the control socket, its reply (a client that says `atNs`, as
    reel-button does; reelctl has no flag for it)."""
    import socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(r.socket)
        s.sendall(json.dumps(obj).encode() + b"\n")
        return json.loads(s.makefile("rb").readline())


def test_start_counts_from_the_instant_its_user_asked(reeld, tmp_path, note):
    """`atNs` on `start` (reel-button's press time): with standby and no pre-roll, the recording
    counts from that instant (up to 250 ms before the request arrived), not from the arrival: the
    first frame is the first captured at or after it."""
    fps = 30
    frame = 10**9 // fps
    r = reeld("asked", standby="true")
    wait_warm(r)
    time.sleep(0.6)   # the warm sources hold their 0.5 s (StandbyState.preroll)
    t0 = source_t0(r, tmp_path, fps)
    asked = time.monotonic_ns() - 120_000_000   # "pressed" 120 ms ago
    reply = request(r, {"v": 1, "id": 1, "cmd": "start", "name": "asked", "atNs": asked})
    assert reply["ok"] and reply["startNs"] == asked and reply["preRollNs"] == 0, reply
    time.sleep(1.0)
    rep = rv.analyze(r.ctl("stop").out.strip())
    first = captured_ns(t0, rep["segments"][0]["first_ms"], fps)
    note(f"start with atNs 120 ms before sending: first frame captured {(first - asked) / 1e6:.2f} ms after atNs")
    assert 0 <= first - asked < frame, (first, asked)
    assert not problems(rep), problems(rep)
    # An instant older than the window counts as 250 ms before the arrival; a later one as the arrival.
    sent = time.monotonic_ns()
    old = request(r, {"v": 1, "id": 2, "cmd": "start", "name": "old", "atNs": sent - 5 * 10**9})
    got = time.monotonic_ns()
    assert old["ok"] and sent - 250_000_000 <= old["startNs"] <= got - 250_000_000, (sent, old, got)
    r.ctl("stop")
    sent = time.monotonic_ns()
    late = request(r, {"v": 1, "id": 3, "cmd": "start", "name": "late", "atNs": sent + 60 * 10**9})
    got = time.monotonic_ns()
    assert late["ok"] and sent <= late["startNs"] <= got, (sent, late, got)
    r.ctl("stop")
    bad = request(r, {"v": 1, "id": 4, "cmd": "start", "name": "bad", "atNs": "soon"})
    assert not bad["ok"] and bad["error"]["code"] == "bad_request" and '"atNs"' in bad["error"]["message"], bad
