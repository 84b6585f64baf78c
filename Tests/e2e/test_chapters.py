"""Chapters (issue 12, item 2): one chapter per take. reeld records its synthetic sources with
pauses; the finished file's chapters, as ffprobe and MediaInfo read them, must start exactly on the
first frame of each take as found by decoding the timecode strip (scripts/reel_verify.py: the
segments between the jumps), end where the next starts, the last where the video ends. A `.part`
left by SIGKILL after a pause/resume gets its chapters when the next start-up recovers it.
Sleeps only shape the schedule (the takes' lengths), never synchronise."""

import json
import os
import re
import subprocess
import time
from fractions import Fraction

import reel_verify as rv


def chapters(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-show_chapters", "-of", "json", path],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    return json.loads(out)["chapters"]


def streams(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_type,start_time,time_base",
                          "-of", "json", path], capture_output=True, text=True, timeout=30, check=True).stdout
    return json.loads(out)["streams"]


def mediainfo_menus(path):
    """The video's duration (s) and each MediaInfo "Menu" track's chapters as (ms, title), from keys
    like _00_00_01_600. (The file's duration may be longer: a file cut short keeps audio past its video.)"""
    out = subprocess.run(["mediainfo", "--Output=JSON", path], capture_output=True, text=True, timeout=60, check=True).stdout
    tracks = json.loads(out)["media"]["track"]
    video = next(t for t in tracks if t["@type"] == "Video")
    menus = []
    for t in tracks:
        if t["@type"] != "Menu":
            continue
        marks = []
        for k, v in (t.get("extra") or {}).items():
            m = re.fullmatch(r"_(\d\d)_(\d\d)_(\d\d)_(\d\d\d)", k)
            if m:
                h, mi, s, ms = map(int, m.groups())
                marks.append((((h * 60 + mi) * 60 + s) * 1000 + ms, v))
        menus.append(sorted(marks))
    return float(video["Duration"]), menus


def take_starts(rep):
    """The output time of each take's first frame (exact, in seconds): the first frame of each
    segment of consecutive source frames, from the decoded timecode strip."""
    tb = Fraction(rep["streams"]["video"]["time_base"])
    frames = rep["video"]["frames"]
    return [frames[s["first_i"]]["pts"] * tb for s in rep["segments"]], tb


def video_end(rep, tb):
    """Where the video ends (exact): its last frame's pts plus one frame."""
    v = rep["video"]
    return (v["last_pts"] + Fraction(v["frame_ticks"]).limit_denominator(1001)) * tb


def check_chapters(path, takes):
    """The chapters of `path` against its decoded content; `takes`: how many there must be."""
    rep = rv.analyze(path)
    assert rv.defects_cut_short(rep) == [], rv.format_report(rep)
    starts, tb = take_starts(rep)
    assert len(starts) == takes, (starts, rv.format_report(rep))
    assert starts[0] == 0
    end = video_end(rep, tb)
    ch = chapters(path)
    print("ffprobe -show_chapters:", json.dumps(ch))
    assert len(ch) == takes, ch
    for i, c in enumerate(ch):
        ctb = Fraction(c["time_base"])
        # exact rational times: the chapter clock is the video's 1/90000
        assert ctb == tb, (c, tb)
        assert c["tags"]["title"] == f"Take {i + 1}", c
        assert c["start"] * ctb == starts[i], (i, c, starts)
        assert c["end"] * ctb == (starts[i + 1] if i + 1 < takes else end), (i, c, starts, end)
    s = {x["codec_type"]: x for x in streams(path)}
    assert s["video"]["start_time"] == "0.000000" and s["audio"]["start_time"] == "0.000000", s
    assert s["data"]["start_time"] == "0.000000", s          # the chapter track
    # MediaInfo: a Menu from the chapter track and one from chpl, both with every take, to the ms.
    duration, menus = mediainfo_menus(path)   # (MediaInfo gives ms)
    assert abs(duration - float(end)) <= 0.002, (duration, float(end))
    assert len(menus) == 2, menus
    for marks in menus:
        assert [title for _, title in marks] == [f"Take {i + 1}" for i in range(takes)], marks
        assert [ms for ms, _ in marks] == [int(x * 1000) for x in starts], (marks, starts)
    return ch


def test_one_chapter_per_take(reeld):
    r = reeld("chapters", size="320x180", fps="15")
    start = r.ctl("start", "--name", "ch")
    t0 = start.mid
    for at, cmd in [(1.5, "pause"), (2.3, "resume"), (3.5, "pause"), (4.0, "resume")]:
        time.sleep(max(0.0, t0 + at - time.monotonic()))   # the schedule
        r.ctl(cmd)
    time.sleep(max(0.0, t0 + 5.2 - time.monotonic()))
    stop = r.ctl("stop")
    final = stop.out.strip()
    assert final == os.path.join(r.out_dir, "ch.mp4") and os.path.isfile(final), (stop, os.listdir(r.out_dir))
    check_chapters(final, 3)
    assert "3 chapters" in r.log_tail(), r.log_tail()


def test_killed_after_a_resume_recovers_with_chapters(reeld, tmp_path):
    out = str(tmp_path / "out")
    os.makedirs(out)
    r = reeld("kill-chapters", size="320x180", fps="15", **{"output-dir": out})
    start = r.ctl("start", "--name", "k")
    t0 = start.mid
    for at, cmd in [(1.2, "pause"), (2.0, "resume")]:
        time.sleep(max(0.0, t0 + at - time.monotonic()))
        r.ctl(cmd)
    time.sleep(max(0.0, t0 + 5.0 - time.monotonic()))      # three seconds of take 2 (x264 holds ~1.3 s), then the crash
    r.proc.kill()
    r.proc.wait()
    part = os.path.join(out, "k.mp4.part")
    assert os.path.exists(part), os.listdir(out)
    assert chapters(part) == [], "a .part (fragmented) has no chapters: its markers are free boxes"
    r2 = reeld("recover-chapters", **{"output-dir": out})
    assert r2.status()["state"] == "idle"
    final = os.path.join(out, "k.mp4")
    assert os.path.exists(final) and not os.path.exists(part), os.listdir(out)
    check_chapters(final, 2)
