"""Undo (issue 13, item 1): `reelctl undo` removes the last take, while paused or while
recording (which ends it and leaves the recording paused), repeatedly down to none. Checked on
the decoded file: the timecode strip shows exactly the kept takes in order, each join jumping by
the true span between them (the removed takes count as pause), A/V in sync at every flash, audio
as long as video; the chapters are the kept takes; a crash after an undo recovers only the kept
takes; stopping with none left leaves no file. Sleeps only shape the schedule."""

import glob
import json
import os
import signal
import subprocess
import time

import pytest

import reel_verify as rv
from test_chapters import chapters
from test_record import CASES, analyze_and_check, check_final_file, expect_refused, sleep_until, windows

# (at seconds after start, command, label): take 1 kept; "two" undone while recording; "three"
# undone while paused; "four" kept.
PLAN = [(1.5, "pause", None), (2.0, "resume", "two"), (3.0, "undo", None), (3.5, "resume", "three"),
        (4.8, "pause", None), (5.1, "undo", None), (5.4, "resume", "four")]
STOP = 6.8


@pytest.mark.parametrize("size,fps,rate,channels", CASES)
def test_undone_takes_leave_the_file(reeld, note, size, fps, rate, channels):
    name = f"undo-{size}-{fps}-{rate}-{channels}"
    r = reeld(name, size=size, fps=fps, **{"sample-rate": rate, "channels": channels})
    start = r.ctl("start", "--name", name)
    calls = {}
    for at, cmd, label in PLAN:
        sleep_until(start.mid + at)
        calls[(at, cmd)] = r.ctl(cmd, *(["--label", label] if label else []))
        if cmd == "undo":
            assert r.status()["state"] == "paused", r.status()
    sleep_until(start.mid + STOP - 0.5)
    st = r.status()
    assert [(t["number"], t["title"]) for t in st["takes"]] == [(1, "Take 1"), (2, "four")], st["takes"]
    sleep_until(start.mid + STOP)
    stop = r.ctl("stop")
    final = check_final_file(r, name, stop)
    undos = [c for (at, cmd), c in calls.items() if cmd == "undo"]
    note(f"{size} {fps} fps: undo round trips (reelctl process included) "
         f"{', '.join(f'{2 * c.half * 1000:.0f} ms' for c in undos)}")
    assert all(2 * c.half < 0.5 for c in undos), [2 * c.half for c in undos]
    # The schedule as run: pauses, and the undone takes ("two" from its resume to the undo that
    # ended it, "three" from its resume to its pause); an undone take counts as pause, so the file
    # must show one cut from the first pause to the last resume.
    def s(c):
        return round(c.mid - start.mid, 4)
    pauses = [(s(calls[(1.5, "pause")]), s(calls[(2.0, "resume")])), (s(calls[(3.0, "undo")]), s(calls[(3.5, "resume")])),
              (s(calls[(4.8, "pause")]), s(calls[(5.4, "resume")]))]
    undone = [(s(calls[(2.0, "resume")]), s(calls[(3.0, "undo")])), (s(calls[(3.5, "resume")]), s(calls[(4.8, "pause")]))]
    merged = rv.merge_undone(pauses, undone)
    assert merged == [(pauses[0][0], pauses[2][1])], merged
    _, tol_pos, tol_len = windows(start, [(calls[(1.5, "pause")], calls[(5.4, "resume")])], fps)
    frame = 1 / fps
    rep, problems = analyze_and_check(final, merged, tol_pos, tol_len, stop_s=stop.mid - start.mid,
                                      tol_stop=2 * frame + start.half + stop.half + 0.002)
    assert not problems, "oracle found:\n  " + "\n  ".join(problems)
    # reelctl verify, told the same schedule, agrees (and fails without --undone: frames are missing).
    args = [a for p, q in pauses for a in ("--pause", f"{p}:{q}")] + [a for p, q in undone for a in ("--undone", f"{p}:{q}")]
    tol_ms = f"{max(tol_pos, tol_len) * 1000:.1f}"
    v = r.ctl("verify", final, *args, "--schedule-tolerance-ms", tol_ms, expect_ok=False)
    assert v.rc == 0, v.out[-3000:] + v.err
    v = r.ctl("verify", final, *args[:2 * len(pauses)], "--schedule-tolerance-ms", tol_ms, expect_ok=False)
    assert v.rc == 1 and "segments" in v.out, v.out[-3000:]
    assert len(rep["segments"]) == 2 and len(rep["sync"]["pairs"]) >= 2, rv.format_report(rep)
    a, v = rep["audio"], rep["video"]
    assert (a["sample_rate"], a["channels"]) == (rate, channels)
    ch = chapters(final)
    assert [c["tags"]["title"] for c in ch] == ["Take 1", "four"], ch
    log = r.log_tail(400)
    assert "take 2 undone (two)" in log and "take 2 undone (three)" in log, log


def test_undo_down_to_none_errors_and_a_crash_after_undo(reeld, tmp_path):
    fps = 15
    out = str(tmp_path / "out")
    os.makedirs(out)
    r = reeld("undo-edges", size="320x180", fps=fps, **{"output-dir": out})
    c = expect_refused(r, "undo")                                     # idle
    assert "not recording" in c.err, c
    # Undo of the first take while recording: nothing left, paused; a second undo is refused.
    start = r.ctl("start", "--name", "none")
    sleep_until(start.mid + 1.0)
    r.ctl("undo")
    st = r.status()
    assert st["state"] == "paused" and st["takes"] == [], st
    c = expect_refused(r, "undo")
    assert "no take left" in c.err, c
    # Stopping with none left leaves no file and says so.
    stop = r.ctl("stop")
    assert stop.out.strip() == "" and "no file was kept" in stop.err, stop
    assert not glob.glob(os.path.join(out, "none.mp4*")), os.listdir(out)
    # Undo the first take, record again: the file starts at the new take.
    start = r.ctl("start", "--name", "again")
    sleep_until(start.mid + 1.0)
    r.ctl("pause")
    r.ctl("undo")
    sleep_until(start.mid + 1.5)
    resume = r.ctl("resume", "--label", "keeper")
    sleep_until(start.mid + 3.0)
    final = os.path.join(out, "again.mp4")
    assert r.ctl("stop").out.strip() == final and os.path.isfile(final), os.listdir(out)
    rep = rv.analyze(final)
    assert rv.defects(rep) == [] or rv.defects(rep) == [f"first frame's source time is {rep['segments'][0]['first_ms']} ms, want 0"], \
        rv.format_report(rep)
    assert len(rep["segments"]) == 1 and abs(rep["segments"][0]["first_ms"] / 1000 - (resume.mid - start.mid)) < 2 / fps + resume.half, \
        rv.format_report(rep)
    assert [c["tags"]["title"] for c in chapters(final)] == ["keeper"]
    # A crash after an undo: take 1 kept, take 2 undone, take 2 again for 3 s, then SIGKILL.
    # The next start recovers the kept takes: take 1 whole, none of the undone take.
    start = r.ctl("start", "--name", "crash")
    sleep_until(start.mid + 1.5)
    pause = r.ctl("pause")
    r.ctl("resume")
    sleep_until(start.mid + 2.5)
    r.ctl("undo")
    sleep_until(start.mid + 3.0)
    resume = r.ctl("resume")
    sleep_until(start.mid + 6.0)
    r.proc.send_signal(signal.SIGKILL)
    r.proc.wait(timeout=10)
    r2 = reeld("undo-edges-2", size="320x180", fps=fps, **{"output-dir": out})
    assert r2.status()["state"] == "idle"   # start-up recovery is done before the socket answers
    final = os.path.join(out, "crash.mp4")
    assert os.path.isfile(final), os.listdir(out)
    rep = rv.analyze(final)
    print(rv.format_report(rep))
    segs = rep["segments"]
    assert len(segs) == 2, rv.format_report(rep)
    assert abs(segs[0]["last_ms"] / 1000 - (pause.mid - start.mid)) < 2 / fps + pause.half + start.half, rv.format_report(rep)
    assert abs(segs[1]["first_ms"] / 1000 - (resume.mid - start.mid)) < 2 / fps + resume.half + start.half, rv.format_report(rep)
    assert rv.defects_cut_short(rep) == [], rv.format_report(rep)


def test_undo_gives_time_back_to_the_cap_and_undo_then_stop(reeld):
    """A cap of 2.5 s: take 1 (1 s), take "b" undone while recording (its time given back,
    `remainingNs` says so, a `take_undone` event), take "c" runs until the cap: the file holds
    exactly 2.5 s in two chapters. Then undo then stop: the last take goes, the file keeps the first."""
    from test_liveview import Lines
    from test_takes import check_capped, events_of
    fps = 30
    r = reeld("undo-cap", size="320x180", fps=fps)
    ev = Lines(r, "events")
    ev.wait(lambda ls: ls, what="the subscribed reply")
    start = r.ctl("start", "--name", "capped", "--max-duration", "2.5")
    sleep_until(start.mid + 1.0)
    r.ctl("pause")
    sleep_until(start.mid + 1.3)
    r.ctl("resume", "--label", "b")
    sleep_until(start.mid + 2.3)
    before = r.status()["remainingNs"]
    r.ctl("undo")
    after = r.status()
    assert after["state"] == "paused" and after["remainingNs"] > before + 0.8e9, (before, after)
    # exactly the cap minus what is kept: take 1 (its length on the frame grid)
    kept = sum(t["durationNs"] for t in after["takes"])
    assert [t["number"] for t in after["takes"]] == [1] and abs(after["remainingNs"] - (2_500_000_000 - kept)) <= 1, after
    ev.wait(lambda _: events_of(ev, "take_undone"), what="the take_undone event")
    u = events_of(ev, "take_undone")
    assert [(e["take"], e["label"], e["title"]) for e in u] == [(2, "b", "b")], u
    sleep_until(start.mid + 2.6)
    r.ctl("resume", "--label", "c")
    rep = check_capped(r, ev, os.path.join(r.out_dir, "capped.mp4"), 2.5, fps, 2)
    assert len(rep["segments"]) == 2, rv.format_report(rep)
    assert [c["tags"]["title"] for c in chapters(os.path.join(r.out_dir, "capped.mp4"))] == ["Take 1", "c"]
    ev.kill()

    start = r.ctl("start", "--name", "undostop")
    sleep_until(start.mid + 1.0)
    pause = r.ctl("pause")
    sleep_until(start.mid + 1.3)
    r.ctl("resume")
    sleep_until(start.mid + 2.0)
    r.ctl("pause")
    r.ctl("undo")
    final = check_final_file(r, "undostop", r.ctl("stop"))
    rep = rv.analyze(final)
    assert rv.defects(rep) == [] and len(rep["segments"]) == 1, rv.format_report(rep)
    assert abs(rep["segments"][0]["last_ms"] / 1000 - (pause.mid - start.mid)) < 2 / fps + pause.half + start.half, rv.format_report(rep)


def test_a_retake_is_announced_kept_again(reeld):
    """The booth's retake: take 1 kept (paused: a `take_kept` event), undone, then recorded again
    under the same number. The new take 1 gets its own `take_kept` when it closes (it once got
    none: the event for number 1 counted as sent), and the file holds it alone."""
    from test_liveview import Lines
    from test_takes import events_of
    r = reeld("retake", size="320x180", fps=15)
    ev = Lines(r, "events")
    ev.wait(lambda ls: ls, what="the subscribed reply")
    start = r.ctl("start", "--name", "retake")
    sleep_until(start.mid + 1.0)
    r.ctl("pause")
    ev.wait(lambda _: events_of(ev, "take_kept"), what="take 1's take_kept")
    r.ctl("undo")
    sleep_until(start.mid + 1.5)
    r.ctl("resume", "--label", "again")
    sleep_until(start.mid + 2.5)
    r.ctl("pause")
    ev.wait(lambda _: len(events_of(ev, "take_kept")) == 2, what="the retake's take_kept")
    final = check_final_file(r, "retake", r.ctl("stop"))
    kept = [(e["take"], e["title"]) for e in events_of(ev, "take_kept")]
    undone = [(e["take"], e["title"]) for e in events_of(ev, "take_undone")]
    assert kept == [(1, "Take 1"), (1, "again")] and undone == [(1, "Take 1")], (kept, undone)
    assert [c["tags"]["title"] for c in chapters(final)] == ["again"]
    ev.kill()


# One track only: take 1 kept, "two" undone while recording, "three" kept to the stop.
SOLO_PLAN = [(1.5, "pause", None), (2.0, "resume", "two"), (3.0, "undo", None), (3.5, "resume", "three")]
SOLO_STOP = 5.4


@pytest.mark.parametrize("track", ["video", "audio"])
def test_undo_with_one_track(reeld, track):
    """Undo with the camera alone (--audio none) and the microphone alone (--video none): the
    clean cut of a take then waits on one track only. The file holds take 1 and "three" and
    nothing of "two": the video's timecode strip, or the audio's beeps (one each whole second of
    source time, so the undone take's beep at 2 s must be missing and the kept ones sit where the
    schedule puts them); the chapters are the kept takes."""
    fps, rate = 30, 48000
    name = f"solo-{track}"
    opts = {"size": "320x180", "fps": fps} if track == "video" else {"sample-rate": rate, "channels": 1}
    r = reeld(name, **opts, **{("audio" if track == "video" else "video"): "none"})
    start = r.ctl("start", "--name", name)
    calls = {}
    for at, cmd, label in SOLO_PLAN:
        sleep_until(start.mid + at)
        calls[label or cmd] = r.ctl(cmd, *(["--label", label] if label else []))
        if cmd == "undo":
            assert r.status()["state"] == "paused", r.status()
    sleep_until(start.mid + SOLO_STOP)
    stop = r.ctl("stop")
    final = check_final_file(r, name, stop)
    rep = rv.analyze(final)
    print(rv.format_report(rep))
    assert not rep["errors"], rep["errors"]
    assert [c["tags"]["title"] for c in chapters(final)] == ["Take 1", "three"]

    def s(c):
        return c.mid - start.mid
    pause, resume2, undo, resume3 = s(calls["pause"]), s(calls["two"]), s(calls["undo"]), s(calls["three"])
    halves = start.half + max(c.half for c in calls.values()) + stop.half
    if track == "video":
        assert rep["audio"] is None and rep["video"] is not None
        # "two" counts as pause: one cut from the pause to the resume of "three".
        pauses = rv.merge_undone([(pause, resume2), (undo, resume3)], [(resume2, undo)])
        assert len(pauses) == 1, pauses
        _, tol_pos, tol_len = windows(start, [(calls["pause"], calls["three"])], fps)
        # With no audio there is no beep to pair with a flash.
        problems = [d for d in rv.defects(rep) if d != "no audio stream" and not d.startswith("flashes without a beep")] + \
            rv.schedule_defects(rep, pauses, tol_pos, tol_len, stop_s=s(stop), tol_stop_s=2 / fps + halves + 0.002)
        assert not problems, "\n".join(problems)
    else:
        a = rep["audio"]
        assert rep["video"] is None and a is not None and a["sample_rate"] == rate
        assert a["frame_pts_gap_count"] == 0, a["frame_pts_gaps"][:3]
        # Kept: source [0, pause) then [resume3, stop): beeps 1 (take 1), 4 and 5 ("three").
        take1 = pause
        want = [1.0, take1 + (4 - resume3), take1 + (5 - resume3)]
        onsets = [b["onset"] for b in a["beeps"] if not b["truncated"]]
        tol = halves + 1024 / rate + 0.002
        assert len(onsets) == 3 and all(abs(o - w) <= tol for o, w in zip(onsets, want)), (onsets, want, tol)
        length = take1 + (s(stop) - resume3)
        assert abs(a["duration"] - length) <= tol, (a["duration"], length, tol)


def test_an_undo_given_up_on_is_never_applied(reeld, tmp_path):
    """An undo whose answer reelctl was told it would not get (the pipeline, overloaded, did not
    answer within 10 s) is cancelled: when the pipeline goes on it does not remove the take, so the
    user's retry cannot remove a second one. REEL_TEST_STALL_PIPELINE holds the pipeline thread."""
    stall = tmp_path / "stall"
    r = reeld("undo-given-up", size="320x180", fps="15", _env={"REEL_TEST_STALL_PIPELINE": str(stall)})
    r.ctl("start", "--name", "given-up")
    r.ctl("pause")
    r.ctl("resume", "--label", "two")
    # Take 2 is listed once its first frame came (the resume's cut resolves on it).
    deadline = time.monotonic() + 5
    while [t["number"] for t in r.status()["takes"]] != [1, 2]:
        assert time.monotonic() < deadline, r.status()["takes"]
        time.sleep(0.02)
    stall.touch()
    undo = r.ctl("undo", expect_ok=False)
    assert undo.rc == 1 and "did not answer within 10 s" in undo.err, undo
    stall.unlink()
    # The pipeline handles its queue in order: once this pause is answered, the undo was seen.
    pause = r.ctl("pause", expect_ok=False)
    assert pause.rc == 0, f"the undo given up on was applied late: {pause}\n{r.log_tail()}"
    assert [t["number"] for t in r.status()["takes"]] == [1, 2], r.status()["takes"]
    # The reply says so, and the log names what was dropped.
    assert "not applied" in undo.err, undo
    assert "given up by its requester" in r.log_tail(200), r.log_tail(200)


def test_undo_with_the_expected_take_is_safe_to_retry(reeld):
    """`reelctl undo --take N` removes take N only if it is the last take: an undo that would
    remove another take is refused naming both numbers, so a retry after a lost answer cannot
    remove a second take."""
    r = reeld("undo-take", size="320x180", fps="15")
    r.ctl("start", "--name", "undo-take")
    r.ctl("pause")
    r.ctl("resume", "--label", "two")
    deadline = time.monotonic() + 5
    while [t["number"] for t in r.status()["takes"]] != [1, 2]:  # take 2 is listed from its first frame
        assert time.monotonic() < deadline, r.status()["takes"]
        time.sleep(0.02)
    wrong = r.ctl("undo", "--take", "1", expect_ok=False)
    assert wrong.rc == 1 and "take 1" in wrong.err and "take 2" in wrong.err, wrong
    assert [t["number"] for t in r.status()["takes"]] == [1, 2]
    r.ctl("undo", "--take", "2")
    assert [t["number"] for t in r.status()["takes"]] == [1]
    # The retry of the same undo (its answer lost): refused, take 1 stays.
    retry = r.ctl("undo", "--take", "2", expect_ok=False)
    assert retry.rc == 1 and "take 2" in retry.err and "take 1" in retry.err, retry
    assert [t["number"] for t in r.status()["takes"]] == [1]
    bad = r.ctl("undo", "--take", "0", expect_ok=False)
    assert bad.rc == 2 and "--take" in bad.err, bad


def test_an_undo_its_client_gave_up_on_is_never_applied(reeld, tmp_path):
    """The same with the client's own deadline: `reelctl --timeout 3 undo` gives up after 3 s (it
    sends its timeout with the request); reeld must not apply the undo after that either."""
    stall = tmp_path / "stall"
    r = reeld("undo-client-gave-up", size="320x180", fps="15", _env={"REEL_TEST_STALL_PIPELINE": str(stall)})
    r.ctl("start", "--name", "client-gave-up")
    r.ctl("pause")
    r.ctl("resume", "--label", "two")
    deadline = time.monotonic() + 5
    while [t["number"] for t in r.status()["takes"]] != [1, 2]:  # take 2 is listed from its first frame
        assert time.monotonic() < deadline, r.status()["takes"]
        time.sleep(0.02)
    stall.touch()
    undo = r.ctl("--timeout", "3", "undo", expect_ok=False)
    assert undo.rc != 0 and undo.t1 - undo.t0 < 6, undo
    time.sleep(1)  # the scenario: the pipeline goes on only after the client gave up (between 3 and 10 s)
    stall.unlink()
    pause = r.ctl("pause", expect_ok=False)
    assert pause.rc == 0, f"the undo its client gave up on was applied late: {pause}\n{r.log_tail()}"
    assert [t["number"] for t in r.status()["takes"]] == [1, 2], r.status()["takes"]
