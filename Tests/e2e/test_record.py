"""End-to-end tests of the real daemon: reeld records its synthetic sources in
real time, reelctl pauses and resumes it on a schedule, and the independent
oracle (scripts/reel_verify.py) checks the MP4 against the schedule and the
source contract (/work/shared/test-sources.md).

Timing: a pause or resume acts at the instant its command reaches reeld; the
test brackets each reelctl call with CLOCK_MONOTONIC readings and uses the
midpoint, so the acting instant is known within half the call's duration.
Source time 0 is the `start` command's instant. Sleeps only shape the schedule."""

import glob
import os
import signal
import time

import pytest

import reel_verify as rv


def sleep_until(t):
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)


def expect_refused(r, *args):
    c = r.ctl(*args, expect_ok=False)
    assert c.rc != 0, f"wrong-state command accepted: {c}"
    assert c.err.strip().startswith("reelctl:"), f"no 'reelctl: ...' message on stderr: {c}"
    return c


def run_schedule(r, name, plan, stop_at, status_at=None):
    """start, then (at_seconds, 'pause'|'resume') from the plan, then stop.
    Returns (start, [(pause_call, resume_call)], stop_call, status_during)."""
    start = r.ctl("start", "--name", name)
    part = os.path.join(r.out_dir, name + ".mp4.part")
    assert start.out.strip() == part, f"start printed {start.out.strip()!r}, want {part!r}"
    t0 = start.mid
    pairs, pending, status_during = [], None, None
    for at, cmd in plan:
        sleep_until(t0 + at)
        c = r.ctl(cmd)
        if cmd == "pause":
            pending = c
            st = r.status()
            assert st["state"] == "paused", st
        else:
            pairs.append((pending, c))
            st = r.status()
            assert st["state"] == "recording", st
    if status_at is not None:
        sleep_until(t0 + status_at)
        status_during = r.status()
    sleep_until(t0 + stop_at)
    stop = r.ctl("stop")
    return start, pairs, stop, status_during


def check_final_file(r, name, stop):
    final = os.path.join(r.out_dir, name + ".mp4")
    assert stop.out.strip() == final, f"stop printed {stop.out.strip()!r}, want {final!r}"
    assert os.path.isfile(final), f"{final} missing; dir has {os.listdir(r.out_dir)}"
    leftovers = glob.glob(os.path.join(r.out_dir, "*.part"))
    assert not leftovers, f".part files remain: {leftovers}"
    return final


def windows(start, pairs, fps):
    """Measured pause windows in source seconds, and the tolerances: one frame
    (pause/resume snap to the frame grid) plus the timing uncertainty of the
    calls involved, plus 2 ms slack."""
    frame = 1 / fps
    pauses = [(p.mid - start.mid, q.mid - start.mid) for p, q in pairs]
    tol_pos = frame + start.half + max((max(p.half, q.half) for p, q in pairs), default=0) + 0.002
    tol_len = frame + max((p.half + q.half for p, q in pairs), default=0) + 0.002
    return pauses, tol_pos, tol_len


def analyze_and_check(final, pauses, tol_pos, tol_len, stop_s, tol_stop, sync_tol_ms=None):
    rep = rv.analyze(final)
    print(rv.format_report(rep))
    print(f"expected pauses (source s): {[(round(p, 4), round(q, 4)) for p, q in pauses]}, "
          f"tol_pos {tol_pos * 1000:.1f} ms, tol_len {tol_len * 1000:.1f} ms, stop {stop_s:.4f} s")
    problems = rv.defects(rep, sync_tolerance_ms=sync_tol_ms) + \
        rv.schedule_defects(rep, pauses, tol_pos, tol_len, stop_s=stop_s, tol_stop_s=tol_stop)
    return rep, problems


CASES = [
    pytest.param("640x360", 30, 48000, 1, id="640x360-30fps-48k-mono"),
    pytest.param("640x360", 30, 44100, 2, id="640x360-30fps-44k1-stereo"),
    pytest.param("320x180", 15, 48000, 1, id="320x180-15fps-48k-mono"),
]

# A: ~2 s, pause ~1.0 s, ~1.5 s, pause ~2.0 s, ~1.2 s, pause ~0.6 s, ~1.5 s
PLAN_A = [(2.0, "pause"), (3.0, "resume"), (4.5, "pause"), (6.5, "resume"),
          (7.7, "pause"), (8.3, "resume")]
STOP_A = 9.8


@pytest.mark.parametrize("size,fps,rate,channels", CASES)
def test_pause_resume_schedule(reeld, size, fps, rate, channels):
    """Test A: three pauses; four segments that join with no gap, jumps equal to
    the pauses, nothing from inside a pause, A/V offsets within half a frame."""
    name = f"a-{size}-{fps}-{rate}-{channels}"
    r = reeld(name, size=size, fps=fps, **{"sample-rate": rate, "channels": channels})
    start, pairs, stop, st = run_schedule(r, name, PLAN_A, STOP_A, status_at=9.0)
    final = check_final_file(r, name, stop)

    print("status during the last segment:", st)
    for key in ("state", "file", "segments", "recordedNs", "frames", "droppedFrames", "audioSamples"):
        assert key in st, f"status --json lacks {key!r}: {st}"
    assert st["state"] == "recording" and st["file"] == final + ".part", st
    idle = r.status()
    assert idle["state"] == "idle", idle

    pauses, tol_pos, tol_len = windows(start, pairs, fps)
    frame = 1 / fps
    rep, problems = analyze_and_check(final, pauses, tol_pos, tol_len,
                                      stop_s=stop.mid - start.mid,
                                      tol_stop=2 * frame + start.half + stop.half + 0.002)
    w, h = map(int, size.split("x"))
    v, a = rep["video"], rep["audio"]
    assert (v["width"], v["height"], v["fps"]) == (w, h, f"{fps}/1"), v["fps"]
    assert (a["sample_rate"], a["channels"]) == (rate, channels)
    assert len(st["segments"]) == 4 == len(rep["segments"]), \
        f"status lists {len(st['segments'])} segments, the file has {len(rep['segments'])}"
    assert len(rep["sync"]["pairs"]) >= 5, "too few flash/beep pairs to judge sync"
    assert not problems, "oracle found:\n  " + "\n  ".join(problems)


def test_wrong_state_commands(reeld):
    """Test B: commands in the wrong state are refused with a message and do not
    disturb a recording, which still verifies clean."""
    name, fps = "b-wrong-state", 15
    r = reeld(name, size="320x180", fps=fps)
    expect_refused(r, "pause")                       # idle
    expect_refused(r, "stop")                        # idle
    assert r.status()["state"] == "idle"
    start = r.ctl("start", "--name", name)
    t0 = start.mid
    sleep_until(t0 + 1.0)
    expect_refused(r, "resume")                      # recording
    expect_refused(r, "start", "--name", name + "-again")
    assert r.status()["state"] == "recording"
    sleep_until(t0 + 1.6)
    p = r.ctl("pause")
    expect_refused(r, "start", "--name", name + "-again")   # paused
    sleep_until(t0 + 2.5)
    q = r.ctl("resume")
    expect_refused(r, "resume")                      # recording again
    sleep_until(t0 + 3.8)
    stop = r.ctl("stop")
    expect_refused(r, "stop")                        # idle after stop
    expect_refused(r, "pause")
    final = check_final_file(r, name, stop)
    assert not os.path.exists(os.path.join(r.out_dir, name + "-again.mp4")), "a refused start left a file"
    pauses, tol_pos, tol_len = windows(start, [(p, q)], fps)
    rep, problems = analyze_and_check(final, pauses, tol_pos, tol_len,
                                      stop_s=stop.mid - start.mid,
                                      tol_stop=2 / fps + start.half + stop.half + 0.002)
    assert len(rep["segments"]) == 2
    assert not problems, "oracle found:\n  " + "\n  ".join(problems)


def test_sigterm_finishes_the_file(reeld):
    """Test C: SIGTERM while recording: reeld says STOPPING=1, exits 0 and leaves
    a complete NAME.mp4 (no .part) that verifies."""
    name, fps = "c-sigterm", 30
    r = reeld(name)
    start = r.ctl("start", "--name", name)
    sleep_until(start.mid + 2.0)
    t_sig = time.monotonic()
    rc = r.terminate(signal.SIGTERM)
    assert rc == 0, f"reeld exited {rc} on SIGTERM\n{r.log_tail()}"
    assert r.wait_notify("STOPPING=1", 0), f"no STOPPING=1 notification: {r.notifications}"
    final = os.path.join(r.out_dir, name + ".mp4")
    assert os.path.isfile(final), f"no {final}; dir has {os.listdir(r.out_dir)}"
    assert not glob.glob(os.path.join(r.out_dir, "*.part")), os.listdir(r.out_dir)
    # the file ends near the signal (loosely: reeld may finish the frame in hand)
    rep, problems = analyze_and_check(final, [], 0, 0, stop_s=t_sig - start.mid,
                                      tol_stop=0.25 + start.half)
    assert len(rep["segments"]) == 1
    assert not problems, "oracle found:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("ppm,lock", [(200, True), (-200, True), (300, False)],
                         ids=["+200ppm-locked", "-200ppm-locked", "+300ppm-unlocked"])
def test_audio_clock_skew(reeld, note, ppm, lock):
    """Test D: the audio clock runs `ppm` fast/slow against CLOCK_MONOTONIC;
    flash and beep k are captured at the same real instant, so a correct
    recorder keeps them together. Over this short run an unlocked recorder
    drifts only ppm us per second (2-3 ms), so the offset bound alone cannot
    tell it from a correct one: the slope of the offset over time (ppm) can.
    With the drift lock the slope must be ~0; without it (--no-drift-lock) it
    must show the skew, which proves this test can fail."""
    name, fps = f"d-skew{ppm:+d}{'' if lock else '-unlocked'}", 30
    opts = {"test-audio-skew-ppm": ppm}
    if not lock:
        opts["no-drift-lock"] = True
    r = reeld(name, **opts)
    start, pairs, stop, _ = run_schedule(r, name, [(3.5, "pause"), (4.5, "resume")], 8.0)
    final = check_final_file(r, name, stop)
    pauses, tol_pos, tol_len = windows(start, pairs, fps)
    rep, problems = analyze_and_check(final, pauses, tol_pos, tol_len,
                                      stop_s=stop.mid - start.mid,
                                      tol_stop=2 / fps + start.half + stop.half + 0.002,
                                      sync_tol_ms=17.0)
    sy = rep["sync"]
    msg = (f"skew {ppm:+d} ppm, drift lock {'on' if lock else 'off'}: max |A/V offset| "
           f"{sy['max_abs_offset_ms']} ms over {len(sy['pairs'])} flash/beep pairs, "
           f"mean {sy['mean_offset_ms']} ms, offset drift {sy['offset_drift_ppm']} ppm")
    print(msg)
    note(msg)
    assert sy["max_abs_offset_ms"] is not None and sy["max_abs_offset_ms"] < 17.0, msg
    if lock:
        assert abs(sy["offset_drift_ppm"]) < 50, "drift lock on, yet the offset drifts: " + msg
        assert sy["max_abs_offset_ms"] < 2.0, msg
    else:
        assert sy["offset_drift_ppm"] * (1 if ppm > 0 else -1) > 0.5 * abs(ppm), \
            "drift lock off, yet no drift measured (the test could not fail): " + msg
    assert not problems, "oracle found:\n  " + "\n  ".join(problems)
