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
    # The kept takes: 0..1.5 and 5.4..stop; what lies between (a pause, two removed takes) is a pause.
    pause, resume = calls[(1.5, "pause")], calls[(5.4, "resume")]
    pauses, tol_pos, tol_len = windows(start, [(pause, resume)], fps)
    frame = 1 / fps
    rep, problems = analyze_and_check(final, pauses, tol_pos, tol_len, stop_s=stop.mid - start.mid,
                                      tol_stop=2 * frame + start.half + stop.half + 0.002)
    assert not problems, "oracle found:\n  " + "\n  ".join(problems)
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
