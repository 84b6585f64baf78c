"""The finisher (issue 12, part 1): a stopped recording is a standard MP4 (ftyp, mdat, moov, no mvex),
and reeld killed after each step of finishing (REEL_TEST_FINISH_STOP_AFTER, test-only) leaves a file
that plays, which the next start-up finishes. The box layout is read by this file's own walker, not
the finisher's parser."""

import json
import os
import struct
import subprocess
import time

import pytest

import reel_verify as rv


def boxes(f, start, end):
    """(type, offset, header length, size) of the boxes in [start, end) of the open file f."""
    out, o = [], start
    while o + 8 <= end:
        f.seek(o)
        head = f.read(16)
        size, kind = struct.unpack(">I4s", head[:8])
        hl = 8
        if size == 1:
            size, hl = struct.unpack(">Q", head[8:16])[0], 16
        elif size == 0:
            size = end - o
        if size < hl or o + size > end:
            out.append((kind.decode("latin-1") + "(cut)", o, hl, size))
            break
        out.append((kind.decode("latin-1"), o, hl, size))
        o += size
    return out


def layout(path):
    """Top-level box types and every box type inside moov (containers walked)."""
    with open(path, "rb") as f:
        end = os.fstat(f.fileno()).st_size
        top = boxes(f, 0, end)
        inner = []

        def walk(a, b):
            for kind, o, hl, size in boxes(f, a, b):
                inner.append(kind)
                if kind in ("trak", "mdia", "minf", "stbl", "edts", "mvex", "udta"):
                    walk(o + hl, o + size)
        for kind, o, hl, size in top:
            if kind == "moov":
                walk(o + hl, o + size)
    return [t[0] for t in top], inner


def assert_finished(path):
    top, inner = layout(path)
    assert [t for t in top if t != "free"] == ["ftyp", "mdat", "moov"], top
    assert "mvex" not in inner and "trex" not in inner, inner
    # video, audio and the chapter track (a take at least: a text track without an edit list)
    assert inner.count("stsd") == 3 and inner.count("elst") == 2 and inner.count("gmhd") == 1 and inner.count("chpl") == 1, inner


def start_times(path):
    """Start times of the video and audio streams (the chapter track is a data stream, checked in test_chapters)."""
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_type,start_time", "-of", "csv=p=0", path],
                         capture_output=True, text=True, timeout=30, check=True).stdout.split()
    return {k: v for k, v in (line.split(",") for line in out) if k in ("video", "audio")}


def assert_plays(path):
    dec = subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"],
                         capture_output=True, text=True, timeout=60)
    assert dec.returncode == 0 and not dec.stderr.strip(), (path, dec.stderr)


def test_stopped_recording_is_a_standard_mp4(reeld, reel_bin_dir, note):
    r = reeld("finish", size="320x180")
    r.ctl("start", "--name", "fin")
    time.sleep(3)  # the recording's length: the scenario, not synchronisation
    r.ctl("stop")
    path = os.path.join(r.out_dir, "fin.mp4")
    deadline = time.monotonic() + 20
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert_finished(path)
    assert start_times(path) == {"video": "0.000000", "audio": "0.000000"}
    assert_plays(path)
    rep = rv.analyze(path)
    assert rv.defects_cut_short(rep) == [], rv.format_report(rep)
    v = subprocess.run([os.path.join(reel_bin_dir, "reelctl"), "verify", path], capture_output=True, text=True, timeout=120)
    assert v.returncode == 0, (v.stdout, v.stderr)
    assert "finished " in r.log_tail() and "as a standard MP4" in r.log_tail(), r.log_tail()


@pytest.mark.parametrize("step", ["parse", "moov", "mdat"])
def test_killed_at_each_finish_step_plays_then_recovers_finished(reeld, tmp_path, step):
    out = str(tmp_path / "out")
    os.makedirs(out)
    r = reeld(f"stop-{step}", size="320x180", _env={"REEL_TEST_FINISH_STOP_AFTER": step}, **{"output-dir": out})
    r.ctl("start", "--name", "k")
    time.sleep(1.2)  # the takes' lengths (two takes: two chapters to recover)
    r.ctl("pause")
    time.sleep(0.3)
    r.ctl("resume")
    time.sleep(1.2)
    r.ctl("stop", expect_ok=False)   # reeld ends itself (_exit 99) right after the step
    assert r.proc.wait(timeout=30) == 99, r.log_tail()
    part = os.path.join(out, "k.mp4.part")
    assert os.path.exists(part), os.listdir(out)
    assert_plays(part)
    top, _ = layout(part)
    if step == "mdat":
        assert_finished(part)                 # finished, only the rename is missing
    else:
        assert top[:4] == ["ftyp", "free", "free", "moov"] and "moof" in top, top   # still the fragmented file (placeholder, signature)
    # The next start-up finishes it (or only renames it) as a stop would have.
    r2 = reeld(f"recover-{step}", **{"output-dir": out})
    assert r2.status()["state"] == "idle"
    final = os.path.join(out, "k.mp4")
    assert os.path.exists(final) and not os.path.exists(part), os.listdir(out)
    assert_finished(final)
    assert start_times(final) == {"video": "0.000000", "audio": "0.000000"}
    ch = json.loads(subprocess.run(["ffprobe", "-v", "error", "-show_chapters", "-of", "json", final],
                                   capture_output=True, text=True, timeout=30, check=True).stdout)["chapters"]
    assert [c["tags"]["title"] for c in ch] == ["Take 1", "Take 2"], ch
    assert_plays(final)
    rep = rv.analyze(final)
    assert rv.defects_cut_short(rep) == [], rv.format_report(rep)
