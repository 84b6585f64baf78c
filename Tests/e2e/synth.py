"""The synthetic sync sources of /work/shared/test-sources.md, generated with numpy
(independently of reeld), and a simulated pause/resume recording of them encoded
with the ffmpeg CLI. Used to prove that the oracle passes a correct recording and
catches broken ones."""

import math
import os
import subprocess
from fractions import Fraction

import numpy as np

WHITE, BLACK, NEUTRAL = 235, 16, 128


def frame_ms(n, fps):
    return math.floor(Fraction(n) / Fraction(fps) * 1000) & 0xFFFFFFFF


def is_flash(n, fps):
    fps = Fraction(fps)
    return n > 0 and math.floor(n / fps) > math.floor((n - 1) / fps)


def video_frame_yuv420p(n, width, height, fps):
    """Frame n as yuv420p bytes, exactly per the contract."""
    fps = Fraction(fps)
    strip_h = height // 8
    cell_w = width // 32
    y = np.empty((height, width), dtype=np.uint8)
    # below the strip: a diagonal ramp that moves every frame, mean luma ~55 (<= 110)
    yy, xx = np.mgrid[0:height, 0:width]
    y[:] = (BLACK + (xx + 2 * yy + 3 * n) % 80).astype(np.uint8)
    if is_flash(n, fps):
        y[strip_h:, :] = WHITE
    ms = frame_ms(n, fps)
    y[:strip_h, :] = BLACK
    for i in range(32):
        if (ms >> (31 - i)) & 1:
            y[:strip_h, i * cell_w:(i + 1) * cell_w] = WHITE
    uv = np.full((height // 2) * (width // 2) * 2, NEUTRAL, dtype=np.uint8)
    return y.tobytes() + uv.tobytes()


def read_strip(y):
    """The timecode (ms) a luma plane's strip carries (what video_frame_yuv420p draws): 32 cells
    across the top H/8 rows, MSB first, each read in its middle."""
    h, w = y.shape
    rows = y[h // 32: h // 8 - h // 32]
    ms = 0
    for i in range(32):
        cell = rows[:, i * w // 32 + w // 128: (i + 1) * w // 32 - w // 128]
        ms = ms * 2 + (1 if cell.mean() > 128 else 0)
    return ms


def audio_samples(m0, m1, rate, channels=1, ppm=0):
    """Source samples [m0, m1) as int16, shape (m1-m0, channels), per the contract."""
    m = np.arange(m0, m1, dtype=np.int64)
    out = np.zeros(len(m), dtype=np.float64)
    k_last = int(m1 / rate) + 2
    blen = rate // 10
    for k in range(1, k_last + 1):
        bk = round(k * rate * (1 + ppm / 1e6))
        sel = (m >= bk) & (m < bk + blen)
        if sel.any():
            j = m[sel] - bk
            out[sel] = 0.5 * np.sin(2 * np.pi * 1000 * j / rate)
    pcm = np.round(out * 32767).astype("<i2")
    return np.repeat(pcm[:, None], channels, axis=1)


def sample_at_frame(n, fps, rate):
    """First sample at or after frame n's source time (exact when rate/fps is integral)."""
    return math.ceil(Fraction(n) / Fraction(fps) * rate)


def build(workdir, name, spans, *, width=320, height=180, fps=15, rate=48000, channels=1,
          extra_frames=(), audio_shift_ms=0, audio_gap_at=None, audio_gap_ms=0,
          pts_gap_at_frame=None, pts_gap_frames=0):
    """Encode a simulated recording of source frame spans [n0, n1) with continuous
    output timestamps. Breakages for the oracle to catch:
      extra_frames      list of (after_output_frame_count, source_frame) leaked into the
                        output (with their audio), as from inside a pause
      audio_shift_ms    audio delayed by this much (silence in front, tail trimmed)
      audio_gap_at / audio_gap_ms   silence inserted into the audio at output frame index
      pts_gap_*         output video pts jump by extra frames at that output frame
    Returns the MP4 path."""
    vpath = os.path.join(workdir, name + ".yuv")
    apath = os.path.join(workdir, name + ".pcm")
    out = os.path.join(workdir, name + ".mp4")
    seq = []
    for n0, n1 in spans:
        seq.extend(range(n0, n1))
    for after, n in sorted(extra_frames, reverse=True):
        seq.insert(after, n)
    with open(vpath, "wb") as vf:
        for n in seq:
            vf.write(video_frame_yuv420p(n, width, height, fps))
    chunks = [audio_samples(sample_at_frame(n, fps, rate), sample_at_frame(n + 1, fps, rate),
                            rate, channels) for n in seq]
    if audio_gap_at is not None:
        gap = np.zeros((int(rate * audio_gap_ms / 1000), channels), dtype="<i2")
        chunks.insert(audio_gap_at, gap)
    pcm = np.concatenate(chunks)
    if audio_shift_ms:
        pad = int(rate * audio_shift_ms / 1000)
        pcm = np.concatenate([np.zeros((pad, channels), dtype="<i2"), pcm])[: len(pcm)]
    pcm.astype("<i2").tofile(apath)
    vf_args = []
    if pts_gap_at_frame is not None:
        vf_args = ["-vf", f"setpts=N/({fps}*TB)+gte(N\\,{pts_gap_at_frame})*{pts_gap_frames}/({fps}*TB)"]
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y",
           "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", f"{width}x{height}", "-r", str(fps), "-i", vpath,
           "-f", "s16le", "-ar", str(rate), "-ac", str(channels), "-i", apath,
           *vf_args, "-fps_mode", "passthrough",
           "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-profile:v", "high",
           "-threads", "1", "-c:a", "aac", "-b:a", "128k", out]
    subprocess.run(cmd, check=True)
    os.unlink(vpath)
    os.unlink(apath)
    return out


def write_source_files(workdir, seconds, *, width=320, height=180, fps=15, rate=48000, channels=1,
                       chroma="420"):
    """The synthetic sources as files reeld can read: `src.y4m` (yuv420p, or yuv422p with
    chroma="422": the same picture, neutral chroma at full height; frames 0..) and `src.wav`
    (S16 PCM, samples 0..), each `seconds` long. Returns their paths."""
    fps = Fraction(fps)
    y4m = os.path.join(workdir, "src.y4m")
    tag = {"420": "C420jpeg", "422": "C422"}[chroma]
    with open(y4m, "wb") as f:
        f.write(f"YUV4MPEG2 W{width} H{height} F{fps.numerator}:{fps.denominator} Ip A1:1 {tag}\n".encode())
        for n in range(int(seconds * fps)):
            f.write(b"FRAME\n")
            frame = video_frame_yuv420p(n, width, height, fps)
            if chroma == "422":
                frame = frame[:width * height] + bytes([NEUTRAL]) * (width * height)
            f.write(frame)
    import wave
    wav = os.path.join(workdir, "src.wav")
    with wave.open(wav, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(audio_samples(0, int(seconds * rate), rate, channels).tobytes())
    return y4m, wav
