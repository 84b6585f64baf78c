"""File sources: reeld records a Y4M + WAV pair holding the contract's signals (made here with
numpy, independently of reeld), unpaced, and the oracle checks the file: every source frame
and sample arrives once, in sync, and the recording ends where the shorter stream ends."""

import json
import subprocess
import os

import pytest

import reel_verify as rv
import synth


def record_files(reeld, tmp_path, name, seconds, wav_seconds=None, **fmt):
    y4m, wav = synth.write_source_files(str(tmp_path), seconds, **fmt)
    if wav_seconds is not None:  # a shorter audio file
        os.makedirs(tmp_path / "short")
        _, wav = synth.write_source_files(str(tmp_path / "short"), wav_seconds, **fmt)
    r = reeld(name, video=f"y4m:{y4m}", audio=f"wav:{wav}", unpaced=True)
    r.notifications.clear()
    r.ctl("start", "--name", name)
    # The recording ends by itself at the end of the files: reeld reports "idle" over sd_notify.
    assert r.wait_notify("STATUS=idle", 60), f"recording did not finish\n{r.log_tail()}"
    status = json.loads(r.ctl("status", "--json").out)
    assert status["state"] == "idle" and status["lastError"] is None, status
    final = status["lastFile"]
    assert final.endswith(f"{name}.mp4") and os.path.exists(final)
    return final, r


def silence_warnings(r):
    """The log's "the audio ended N samples ... filled with silence" lines."""
    r.log.flush()
    with open(r.log_path, errors="replace") as f:
        return [l.strip() for l in f if "filled with silence" in l]


@pytest.mark.parametrize("chroma", ["420", "422"])
def test_y4m_and_wav_are_recorded_whole_and_in_sync(reeld, tmp_path, chroma):
    """4:2:0 goes to the encoder as read; 4:2:2 is converted on the reader's thread."""
    final, r = record_files(reeld, tmp_path, "files", 4, width=320, height=180, fps=15, rate=48000, chroma=chroma)
    rep = rv.analyze(final)
    problems = rv.defects(rep)
    assert not problems, problems
    v = rep["video"]
    assert v["frame_count"] == 60, v["frame_count"]            # every frame of the file, once
    assert len(rep["segments"]) == 1 and rep["segments"][0]["first_ms"] == 0
    assert len(rep["sync"]["pairs"]) == 3 and rep["sync"]["max_abs_offset_ms"] < 1.0, rep["sync"]
    # Audio as long as the video needs no filling: the drift lock's filter gives back the file's
    # last ~16 samples at its end (it used to keep them, and every file recording warned of silence).
    assert silence_warnings(r) == []


def test_the_video_end_ends_the_recording_and_short_audio_is_padded(reeld, tmp_path):
    """Video defines the frame grid: its end is the recording's end. An audio file 1.5 s shorter
    is completed with silence (as for a microphone that stops), so both streams end together."""
    final, r = record_files(reeld, tmp_path, "short-audio", 4, wav_seconds=2.5, width=320, height=180, fps=15)
    rep = rv.analyze(final)
    assert rep["errors"] == [], rep["errors"]
    v, a, sy = rep["video"], rep["audio"], rep["sync"]
    assert v["frame_count"] == 60 and v["pts_grid_error_count"] == 0
    assert abs(a["start"] + a["duration"] - v["duration"]) * 48000 <= 1024
    # Beeps 1 and 2 are in the audio file and sit on their flashes; flash 3 comes after its end.
    assert [round(p["t"]) for p in sy["pairs"]] == [1, 2] and sy["max_abs_offset_ms"] < 1.0, sy
    assert len(sy["unpaired_flashes"]) == 1, sy["unpaired_flashes"]
    # The log says how much was filled, in samples and time: 1.5 s at 48 kHz.
    [w] = silence_warnings(r)
    assert "the audio ended 72000 samples (1500.0 ms) before the recording's end" in w, w


@pytest.mark.parametrize("channels", [3, 4, 5])
def test_every_channel_keeps_its_sound(tmp_path, channels):
    """Each channel of a multi-channel WAV comes back at its level: speech-band pink noise on
    channel k (the others silent, so nothing can leak in unseen), RMS within 1 dB of the source
    after AAC. FFmpeg's default layout for 3 channels is 2.1, whose third channel AAC encodes as
    LFE, low-passed near 120 Hz: speech there came back 10.7 dB quieter (issue 23's VM tier
    found it)."""
    import numpy as np
    import join_audio as ja
    rate, n = 48000, 2 * 48000
    noise = ja.pink_noise(n, rate)
    for k in range(channels):
        wav = str(tmp_path / f"ch{k}.wav")
        ja.write_wav(wav, [noise if c == k else np.zeros(n) for c in range(channels)], rate)
        out = str(tmp_path / f"ch{k}.mp4")
        rec = os.path.join(os.environ["REEL_BIN_DIR"], "reeld")
        p = subprocess.run([rec, "record", "--output", out, "--video", "test", "--size", "160x90", "--fps", "10",
                            "--audio", f"wav:{wav}", "--channels", str(channels), "--duration", "2", "--unpaced"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        assert p.returncode == 0, p.stdout
        x, _, _ = ja.decode(out)
        db = [20 * np.log10(np.sqrt(np.mean(x[2048:-2048, c] ** 2)) + 1e-12) for c in range(channels)]
        src = 20 * np.log10(np.sqrt(np.mean(noise ** 2)))
        assert abs(db[k] - src) < 1.0, f"{channels} channels: channel {k + 1} came back at {db[k]:.1f} dB, the source at {src:.1f} dB (all: {[round(d, 1) for d in db]})"
        assert all(d < src - 30 for c, d in enumerate(db) if c != k), f"{channels} channels: channel {k + 1} leaked: {[round(d, 1) for d in db]}"
