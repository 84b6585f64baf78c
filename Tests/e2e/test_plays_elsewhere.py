"""The file plays elsewhere, not only in FFmpeg: GStreamer's own MP4 demuxer (qtdemux, which
shares no code with libavformat) reads a finished recording with pauses, and what it yields
must be what FFmpeg yields: every frame, each carrying the same timecode in the same order,
and the same audio with the beeps in the same places. A finished file has no `mfra` index
(movflags skip_trailer), so this also shows a second demuxer needs none; a crash-recovered
`.part` is checked the same way."""

import os
import re
import subprocess

import numpy as np

import reel_verify as rv
from reel_harness import recording_for  # scripts/, on sys.path through conftest.py

W, H, FPS, RATE = 320, 180, 15, 48000

def record(bindir, out, *args):
    p = subprocess.run([os.path.join(bindir, "reeld"), "record", "--video", "test", "--audio", "test", "--unpaced",
                        "--size", f"{W}x{H}", "--fps", str(FPS), "--output", out, *args],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, REEL_CONFIG="/dev/null"))
    assert p.returncode == 0, p.stderr


def gst_decode(path, tmp):
    """Decodes with qtdemux + avdec into raw I420 frames and mono S16 samples."""
    yuv, pcm = str(tmp / "gst.yuv"), str(tmp / "gst.pcm")
    # gst-launch-1.0 comes from make deps (gstreamer1.0-tools, -plugins-good, -libav)
    p = subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={path}", "!", "qtdemux", "name=d",
                        "d.video_0", "!", "queue", "!", "avdec_h264", "!", "videoconvert", "!",
                        "video/x-raw,format=I420", "!", "filesink", f"location={yuv}",
                        "d.audio_0", "!", "queue", "!", "avdec_aac", "!", "audioconvert", "!",
                        "audio/x-raw,format=S16LE,channels=1", "!", "filesink", f"location={pcm}"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"GStreamer could not play {path}: {p.stdout}{p.stderr}"
    frames = np.fromfile(yuv, np.uint8)
    size = W * H * 3 // 2
    assert len(frames) % size == 0
    ys = frames.reshape(-1, size)[:, :W * H].reshape(-1, H, W)
    return ys, np.fromfile(pcm, "<i2").astype(np.float64) / 32768.0


def check_same_as_ffmpeg(path, tmp):
    rep = rv.analyze(path)
    ys, x = gst_decode(path, tmp)
    ff_ms = [f["ms"] for f in rep["video"]["frames"]]
    gst_ms = [rv._read_strip(y, W, H)[0] for y in ys]
    assert len(gst_ms) == len(ff_ms), f"GStreamer {len(gst_ms)} frames, FFmpeg {len(ff_ms)}"
    assert gst_ms == ff_ms, "GStreamer's frames carry other timecodes than FFmpeg's"
    a = rep["audio"]
    assert abs(len(x) - a["samples"]) <= 1024, f"GStreamer {len(x)} samples, FFmpeg {a['samples']}"
    # beeps: the same onsets (GStreamer's sample 0 is output time 0, as FFmpeg's after priming);
    # not a beep in the last 0.15 s, which the two decoders may end differently (the last AAC
    # frame's padding, a file cut by a crash)
    end = min(len(x), a["samples"]) / RATE - 0.15
    gst_onsets = [b["onset_sample"] / RATE for b in rv.find_beeps(x, RATE) if b["onset_sample"] / RATE < end]
    ff_onsets = [b["onset"] for b in a["beeps"] if not b.get("split_at_resume") and b["onset"] < end]
    assert len(gst_onsets) == len(ff_onsets) >= 3, (gst_onsets, ff_onsets)
    assert max(abs(g - f) for g, f in zip(gst_onsets, ff_onsets)) < 0.001, (gst_onsets, ff_onsets)
    return rep


def test_gstreamer_reads_a_finished_recording_as_ffmpeg_does(reel_bin_dir, tmp_path):
    out = str(tmp_path / "rec.mp4")
    record(reel_bin_dir, out, "--duration", "12", "--pause-every", "4", "--pause-for", "1.2")
    with open(out, "rb") as f:
        assert b"mfra" not in f.read()[-64:], "a finished file ends with its last fragment"
    rep = check_same_as_ffmpeg(out, tmp_path)
    assert len(rep["segments"]) == 3 and not rv.defects(rep), rv.defects(rep)


def test_gstreamer_reads_a_recording_recovered_after_a_crash(reeld, tmp_path):
    out = str(tmp_path / "out")
    os.makedirs(out)
    r = reeld("crashed", size=f"{W}x{H}", fps=str(FPS), **{"output-dir": out})
    mark = len(r.notifications)
    r.ctl("start", "--name", "crashed")
    # about 6 s in (reeld's once-a-second STATUS= says so), kill it: no stop, no trailer. The
    # video keeps at least 3 s: the open fragment and x264's delay (~1 s at 15 fps) are lost.
    # (a line per supervisor tick, so a second may be skipped: any from 6 to 9 will do)
    assert r.wait_notify_after(mark, recording_for(6), 30), \
        r.log_tail()
    r.proc.kill()
    r.proc.wait()
    reeld("recover", **{"output-dir": out})          # start-up recovery renames the .part
    path = os.path.join(out, "crashed.mp4")
    assert os.path.isfile(path), sorted(os.listdir(out))
    rep = check_same_as_ffmpeg(path, tmp_path)
    assert rep["video"]["frame_count"] >= 3 * FPS
