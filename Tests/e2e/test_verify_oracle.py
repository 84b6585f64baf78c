"""Proof that the oracle (scripts/reel_verify.py) can pass and can fail.

Runs without reeld: the contract's sources are generated here with numpy, a
pause/resume recording is simulated (source spans dropped, output timestamps
continuous), encoded with the ffmpeg CLI (libx264 High yuv420p + AAC), and the
oracle must report exactly what was built. Then broken variants, each of which
the oracle must catch, and catch for the right reason."""

import json
import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import reel_verify as rv
import synth

FPS, RATE = 15, 48000
FRAME = 1 / FPS
# source frame spans kept: the first pause starts one frame after flash 2 (so
# beep 2 is cut short at the pause, its flash kept); the second resumes two
# thirds into beep 5 (flash 5 falls in the pause, the beep's tail survives)
SPANS = [(0, 31), (40, 66), (76, 98)]
PAUSES = [(31 / FPS, 40 / FPS), (66 / FPS, 76 / FPS)]   # source seconds

VARIANTS = {
    "good": {},
    "audio_late_40ms": {"audio_shift_ms": 40},
    # source frame 35 (2333 ms, inside the first pause) leaked, with its audio
    "frame_from_pause": {"extra_frames": [(31, 35)]},
    # output pts jump by two extra frames at the first resume
    "pts_gap_at_resume": {"pts_gap_at_frame": 31, "pts_gap_frames": 2},
    # 50 ms of silence inserted into the audio at the first resume
    "audio_gap_at_resume": {"audio_gap_at": 31, "audio_gap_ms": 50},
}


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    d = tmp_path_factory.mktemp("oracle")
    cache = {}

    def get(name):
        if name not in cache:
            path = synth.build(str(d), name, SPANS, width=320, height=180, fps=FPS, rate=RATE,
                               **VARIANTS[name])
            rep = rv.analyze(path)
            print(rv.format_report(rep))
            cache[name] = rep
        return cache[name]
    return get


def exact_schedule(rep):
    return rv.schedule_defects(rep, PAUSES, tol_pos_s=0, tol_len_s=0)


def test_good_recording_reads_exactly(recording):
    rep = recording("good")
    assert rv.defects(rep) == []
    assert exact_schedule(rep) == []
    st = rep["streams"]
    assert (st["video"]["codec"], st["video"]["profile"], st["video"]["pix_fmt"]) == ("h264", "High", "yuv420p")
    assert (st["audio"]["codec"], st["audio"]["profile"]) == ("aac", "LC")
    v = rep["video"]
    assert (v["width"], v["height"], v["fps"]) == (320, 180, "15/1")
    assert v["frame_count"] == sum(b - a for a, b in SPANS)
    assert v["pts_steps"] == [round(v["frame_ticks"])]
    # every frame's timecode is the source frame that was put there
    want_n = [n for a, b in SPANS for n in range(a, b)]
    assert [f["n"] for f in v["frames"]] == want_n
    assert [f["ms"] for f in v["frames"]] == [math.floor(n * 1000 / FPS) for n in want_n]
    assert [(s["first_ms"], s["last_ms"]) for s in rep["segments"]] == [(0, 2000), (2666, 4333), (5066, 6466)]
    assert [j["pause_frames"] for j in rep["jumps"]] == [9, 10]
    assert [round(j["pause_ms"], 3) for j in rep["jumps"]] == [600.0, 666.667]
    # flashes 1, 2, 3, 4, 6 survive; flash 5 fell in the second pause
    sy = rep["sync"]
    assert [p["source_ms"] for p in sy["pairs"]] == [1000, 2000, 3000, 4000, 6000]
    assert sy["max_abs_offset_ms"] < 0.1, "onset precision on a clean encode"
    assert sy["unpaired_flashes"] == [] and sy["unpaired_beeps"] == []
    # beep 5's tail starts exactly at the second resume: recognised as a cut, not a defect
    assert len(sy["cut_beeps_at_resume"]) == 1
    assert abs(sy["cut_beeps_at_resume"][0]["onset"] - rep["jumps"][1]["out_time"]) < 0.001
    # beep 2 is cut short by the first pause (66.7 ms kept) and still paired with flash 2
    b2 = [b for b in rep["audio"]["beeps"] if abs(b["onset"] - 2.0) < 0.01]
    assert len(b2) == 1 and b2[0]["truncated"] and abs(b2[0]["duration_ms"] - 1000 / FPS) < 1
    assert abs(rep["audio"]["duration"] - v["duration"]) * RATE <= 1024
    assert rep["errors"] == []


def test_catches_audio_shifted_40ms(recording):
    rep = recording("audio_late_40ms")
    offs = [p["offset_ms"] for p in rep["sync"]["pairs"]]
    assert offs and all(abs(o - 40) < 1 for o in offs), offs
    d = rv.defects(rep)
    assert any("flash/beep pairs off by more than" in x for x in d), d
    assert exact_schedule(rep) == [], "video untouched: the schedule still reads exactly"


def test_catches_frame_from_inside_a_pause(recording):
    rep = recording("frame_from_pause")
    assert len(rep["segments"]) == 4
    stray = rep["segments"][1]
    assert (stray["frames"], stray["first_ms"]) == (1, 2333)
    d = exact_schedule(rep)
    assert any("frames from inside it" in x and "2333" in x for x in d), d
    assert any("segments, want 3" in x for x in d), d
    # a leak with matching audio keeps sync: only the schedule check sees it,
    # even with the loosest tolerance the e2e tests use (one 15 fps frame + slack)
    loose = rv.schedule_defects(rep, PAUSES, tol_pos_s=FRAME + 0.05, tol_len_s=FRAME + 0.05)
    assert any("frames from inside it" in x for x in loose), loose


def test_catches_video_pts_gap_at_resume(recording):
    rep = recording("pts_gap_at_resume")
    v = rep["video"]
    assert v["pts_steps"] == [1024, 3 * 1024], v["pts_steps"]
    d = rv.defects(rep)
    assert any("off the one-frame grid" in x for x in d), d
    # the strip still reads right: segments and jumps alone would not catch it
    assert exact_schedule(rep) == []


def test_catches_audio_gap_at_resume(recording):
    rep = recording("audio_gap_at_resume")
    d = rv.defects(rep)
    assert any("flash/beep pairs off by more than" in x for x in d), d
    assert any(x.startswith("audio ends at") for x in d), d
    late = [p["offset_ms"] for p in rep["sync"]["pairs"] if p["t"] > rep["jumps"][0]["out_time"]]
    assert late and all(abs(o - 50) < 1 for o in late), late


@pytest.mark.parametrize("fps,spans,shift_ms", [
    # CI's VM run: at 10 fps the pause began right after flash 2's frame (beep 2 whole), the
    # resume's first frame was flash 3: one 200 ms tone from 2.0 s
    (10, [(0, 21), (30, 80)], 0),
    (10, [(0, 21), (30, 80)], 30),
    # 15 fps: beep 2 cut to 66.7 ms by the pause, then beep 3 whole from the resume
    (15, [(0, 31), (45, 98)], 0),
])
def test_beeps_joined_across_a_resume_are_split(tmp_path, fps, spans, shift_ms):
    """A beep running into the pause and the next beep starting the resume make one tone with
    no dip; the oracle must still pair each flash with its own beep, measured on the audio
    (the 30 ms late variant shows 30 ms there too, not 0)."""
    path = synth.build(str(tmp_path), "joined", spans, fps=fps, rate=RATE, audio_shift_ms=shift_ms)
    rep = rv.analyze(path)
    print(rv.format_report(rep))
    sy = rep["sync"]
    resume = rep["jumps"][0]["out_time"]
    assert [p["source_ms"] for p in sy["pairs"]] == [1000, 2000, 3000, 4000, 5000, 6000, 7000][:len(sy["pairs"])]
    assert len(sy["pairs"]) >= 5 and sy["unpaired_flashes"] == [] and sy["unpaired_beeps"] == []
    at_resume = next(p for p in sy["pairs"] if p["source_ms"] == 3000)
    assert abs(at_resume["t"] - resume) < 1e-6
    assert all(abs(p["offset_ms"] - shift_ms) < 1 for p in sy["pairs"]), sy["pairs"]
    split = [b for b in rep["audio"]["beeps"] if b.get("split_at_resume")]
    assert len(split) == 2 and abs(split[1]["onset"] - resume - shift_ms / 1000) < 0.001, split
    if shift_ms == 0:
        assert rv.defects(rep) == []
    else:
        assert any("flash/beep pairs off by more than" in x for x in rv.defects(rep, sync_tolerance_ms=20))


def test_beep_cut_by_the_pause_and_the_resume_splits_at_the_resume(tmp_path):
    """CI's e2e run at 30 fps: the pause cut beep 2 after 66.7 ms and the resume's first frame
    came one frame after flash 3, so beep 3's last 66.7 ms follow with no dip. The 133 ms tone's
    end minus 100 ms lies within a frame of the resume, yet its second part is a cut tail, not a
    whole beep (the resume's first frame is no flash): it must be split at the resume and filed
    as cut there, not reported as a second beep near flash 2."""
    path = synth.build(str(tmp_path), "cut_twice", [(0, 62), (91, 180)], fps=30, rate=RATE)
    rep = rv.analyze(path)
    print(rv.format_report(rep))
    sy = rep["sync"]
    resume = rep["jumps"][0]["out_time"]
    assert [p["source_ms"] for p in sy["pairs"]] == [1000, 2000, 4000, 5000], sy["pairs"]
    assert sy["unpaired_flashes"] == [] and sy["unpaired_beeps"] == [], sy
    assert len(sy["cut_beeps_at_resume"]) == 1, sy
    split = [b for b in rep["audio"]["beeps"] if b.get("split_at_resume")]
    assert len(split) == 2 and abs(split[1]["onset"] - resume) < 0.001, split
    assert abs(split[0]["duration_ms"] - 2000 / 30) < 1, split
    assert rv.defects(rep) == []


@pytest.mark.parametrize("pause_frame", [61, 62, 63])     # beep 2 cut after 33.3, 66.7, 100 ms
@pytest.mark.parametrize("resume_frame", [90, 91, 92])    # flash 3 first, or beep 3's last 66.7, 33.3 ms
def test_every_cut_of_a_beep_at_30fps_reads_clean(tmp_path, pause_frame, resume_frame):
    """Every way a pause and a resume on the 30 fps grid can cut beeps 2 and 3 (pause requests
    land anywhere in a real run): a correct recording must read without a defect."""
    spans = [(0, pause_frame), (resume_frame, resume_frame + 75)]
    rep = rv.analyze(synth.build(str(tmp_path), "cut", spans, fps=30, rate=RATE))
    assert rv.defects(rep) == [], rv.format_report(rep)
    assert [p["source_ms"] for p in rep["sync"]["pairs"]][:2] == [1000, 2000]


def test_cli_exit_status_and_json(recording, tmp_path_factory):
    recording("good")
    recording("pts_gap_at_resume")
    d = next(p for p in tmp_path_factory.getbasetemp().iterdir() if p.name.startswith("oracle"))
    script = os.path.join(os.path.dirname(rv.__file__), "reel_verify.py")
    ok = subprocess.run([sys.executable, script, str(d / "good.mp4"), "--json"], capture_output=True)
    assert ok.returncode == 0, ok.stderr
    j = json.loads(ok.stdout)
    assert j["defects"] == [] and len(j["segments"]) == 3
    bad = subprocess.run([sys.executable, script, str(d / "pts_gap_at_resume.mp4")], capture_output=True)
    assert bad.returncode == 1 and b"off the one-frame grid" in bad.stdout


# --- the oracle's building blocks, without a codec --------------------------

@pytest.mark.parametrize("fps", [Fraction(15), Fraction(25), Fraction(30), Fraction(60),
                                 Fraction(30000, 1001), Fraction(24000, 1001)])
def test_timecode_inverts_exactly(fps):
    for n in range(0, 20000, 7):
        ms = rv.source_ms(n, fps)
        assert rv.frame_index_from_ms(ms, fps) == n
        assert rv.frame_index_from_ms(ms + 1, fps) in (None, n + 1)
    assert [n for n in range(200) if rv.is_flash_index(n, fps)] == \
        [n for n in range(1, 200) if math.floor(n / fps) > math.floor((n - 1) / fps)]


@pytest.mark.parametrize("rate", [48000, 44100])
def test_beep_onsets_exact_and_pre_echo_ignored(rate):
    x = synth.audio_samples(0, int(3.5 * rate), rate)[:, 0].astype(np.float64) / 32768
    # AAC-like pre-echo: a quiet 1 kHz smear over the 20 ms before beep 2, and noise
    k = 2 * rate
    j = np.arange(k - rate // 50, k)
    x[j] += 0.08 * np.sin(2 * np.pi * 1000 * j / rate)
    x += np.random.default_rng(1).normal(0, 0.003, len(x))
    beeps = rv.find_beeps(x, rate)
    assert len(beeps) == 3
    for kk, b in zip((1, 2, 3), beeps):
        assert abs(b["onset_sample"] - kk * rate) < 0.05 * rate / 1000, b   # 0.05 ms
        assert b["phase_ok"]
        assert abs(b["duration_ms"] - 100) < 0.5
