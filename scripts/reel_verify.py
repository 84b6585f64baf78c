#!/usr/bin/python3
"""reel_verify: an independent oracle for recordings of Reel's synthetic sources.

Decodes a recording of `reeld --video test --audio test` with the ffprobe/ffmpeg
CLI (as a player sees it: the MP4 demuxer applies the edit list) and reports what
it really contains, measured against /work/shared/test-sources.md:

  streams   codec, profile, pix_fmt, time bases, start times
  video     per-frame output pts, the timecode read from the strip, flash frames
  segments  runs of frames whose source frame index advances by one; the jumps
            between them are the pause lengths seen in the file
  audio     decoded PCM, duration, continuity, 1 kHz beep onsets
  sync      beep onset minus flash frame time, per flash
  errors    `ffmpeg -xerror` decode errors
  defects   every violation of the invariants that hold for any correct
            recording (schedule-specific checks belong to the caller)

Usage:  reel_verify.py FILE [--json]        (exit status 1 when defects exist)
Module: analyze(path) -> dict;  defects(report) -> [str];  format_report(report)

Only the standard library, numpy and the ffmpeg/ffprobe CLI are used.
"""

import json
import math
import subprocess
import sys
from fractions import Fraction

import numpy as np

STRIP_THRESHOLD = 125          # contract: white Y=235, black Y=16
FLASH_THRESHOLD = 200          # mean luma below the strip of a flash frame
BEEP_FREQ = 1000.0
BEEP_AMPLITUDE = 0.5
BEEP_SECONDS = 0.1             # rate/10 samples
PAIR_WINDOW_S = 0.100          # a flash and a beep further apart are unpaired
AAC_FRAME = 1024


# ----------------------------------------------------------------------------
# small helpers

def _run(cmd, binary=False):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout if binary else p.stdout.decode("utf-8", "replace")
    return p.returncode, out, p.stderr.decode("utf-8", "replace")


def _frac(s, default=None):
    """'1/15360' or '15/1' or '0.000000' -> Fraction; None for N/A or 0/0."""
    if s is None or s in ("N/A", "0/0", ""):
        return default
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return default


def _fstr(f):
    return None if f is None else f"{f.numerator}/{f.denominator}"


def _ffprobe_json(path, *args):
    rc, out, err = _run(["ffprobe", "-v", "error", *args, "-of", "json", path])
    if rc != 0:
        raise RuntimeError(f"ffprobe failed on {path}: {err.strip()}")
    return json.loads(out or "{}")


# ----------------------------------------------------------------------------
# the contract's signals, as functions of the source frame index / sample index

def source_ms(n, fps):
    """Timecode of source frame n: floor(n / fps * 1000) (exact rational)."""
    return math.floor(Fraction(n) / fps * 1000)


def frame_index_from_ms(ms, fps):
    """Inverse of source_ms: the unique frame n with floor(n/fps*1000) == ms, or
    None when no frame carries that timecode (a misread or foreign strip).
    Unique because one frame lasts more than 1 ms (fps < 1000)."""
    n = math.ceil(Fraction(ms) * fps / 1000)
    return n if source_ms(n, fps) == ms else None


def is_flash_index(n, fps):
    """Frame n is a flash when n > 0 and floor(t_n) > floor(t_{n-1})."""
    return n > 0 and math.floor(Fraction(n) / fps) > math.floor(Fraction(n - 1) / fps)


# ----------------------------------------------------------------------------
# streams

def _streams(path):
    info = _ffprobe_json(path, "-show_streams", "-show_format")
    v = next((s for s in info.get("streams", []) if s.get("codec_type") == "video"), None)
    a = next((s for s in info.get("streams", []) if s.get("codec_type") == "audio"), None)
    out = {"format": info.get("format", {}).get("format_name"), "video": None, "audio": None}
    if v:
        out["video"] = {
            "index": v.get("index"), "codec": v.get("codec_name"), "profile": v.get("profile"),
            "pix_fmt": v.get("pix_fmt"), "width": v.get("width"), "height": v.get("height"),
            "time_base": v.get("time_base"), "start_pts": v.get("start_pts"),
            "start_time": float(v["start_time"]) if v.get("start_time") not in (None, "N/A") else None,
            "r_frame_rate": v.get("r_frame_rate"), "avg_frame_rate": v.get("avg_frame_rate"),
            "nb_frames": int(v["nb_frames"]) if str(v.get("nb_frames", "")).isdigit() else None,
        }
    if a:
        out["audio"] = {
            "index": a.get("index"), "codec": a.get("codec_name"), "profile": a.get("profile"),
            "sample_rate": int(a["sample_rate"]) if a.get("sample_rate") else None,
            "channels": a.get("channels"), "time_base": a.get("time_base"),
            "start_pts": a.get("start_pts"),
            "start_time": float(a["start_time"]) if a.get("start_time") not in (None, "N/A") else None,
        }
    return out


def _frames(path):
    """Decoded frames of both streams, in decode-output order, as ffprobe sees them."""
    info = _ffprobe_json(path, "-show_entries",
                         "frame=stream_index,media_type,pts,best_effort_timestamp,nb_samples,pict_type")
    vids, auds = [], []
    for f in info.get("frames", []):
        pts = f.get("pts", f.get("best_effort_timestamp"))
        if pts in (None, "N/A"):
            pts = f.get("best_effort_timestamp")
        pts = int(pts) if pts not in (None, "N/A") else None
        if f.get("media_type") == "video":
            vids.append({"pts": pts, "pict_type": f.get("pict_type")})
        elif f.get("media_type") == "audio":
            auds.append({"pts": pts, "nb_samples": int(f.get("nb_samples", 0))})
    return vids, auds


# ----------------------------------------------------------------------------
# video

def _read_strip(y, width, height):
    """Timecode bits from the centre of each of the 32 cells of the top H/8 rows.
    Samples a small block in the middle of each cell (robust to H/8 rounding and
    to compression ringing at the cell edges). Returns (ms, min margin to threshold)."""
    strip_h = height // 8
    cell_w = width / 32.0
    r0, r1 = max(0, strip_h // 2 - max(1, strip_h // 6)), strip_h // 2 + max(1, strip_h // 6)
    ms, margin = 0, 255.0
    half_w = max(1, int(cell_w // 6))
    for i in range(32):
        cx = int((i + 0.5) * cell_w)
        val = float(y[r0:r1, max(0, cx - half_w):cx + half_w].mean())
        margin = min(margin, abs(val - STRIP_THRESHOLD))
        if val > STRIP_THRESHOLD:
            ms |= 1 << (31 - i)
    return ms, margin


def _decode_video(path, width, height):
    """Yields the luma plane of every decoded frame (no frame dropped or duplicated)."""
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-map", "0:v:0",
           "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    size = width * height * 3 // 2
    try:
        while True:
            buf = p.stdout.read(size)
            if len(buf) < size:
                break
            yield np.frombuffer(buf, dtype=np.uint8, count=width * height).reshape(height, width)
    finally:
        p.stdout.close()
        p.stderr.read()
        p.wait()


def _infer_fps(streams, pts_steps, tb):
    """Frame rate: the stream's r_frame_rate when it agrees with the commonest pts step."""
    rfr = _frac(streams["video"].get("r_frame_rate")) if streams["video"] else None
    mode_fps = None
    if pts_steps:
        vals, counts = np.unique(np.array(pts_steps), return_counts=True)
        step = int(vals[np.argmax(counts)])
        if step > 0:
            mode_fps = (1 / (step * tb)).limit_denominator(1001)
    if rfr and rfr > 0 and (mode_fps is None or abs(float(rfr / mode_fps) - 1) < 0.02):
        return rfr.limit_denominator(1001), mode_fps
    return (mode_fps or rfr), mode_fps


def _video(path, streams, vframes):
    v = streams["video"]
    width, height = v["width"], v["height"]
    tb = _frac(v["time_base"])
    pts = [f["pts"] for f in vframes]
    steps = [b - a for a, b in zip(pts, pts[1:])] if None not in pts else []
    fps, mode_fps = _infer_fps(streams, steps, tb)
    frame_ticks = 1 / (fps * tb)                       # Fraction; integral for sane time bases
    frame_ms = float(1000 / fps)
    strip_h = height // 8

    frames, margin_min = [], 255.0
    for i, y in enumerate(_decode_video(path, width, height)):
        ms, margin = _read_strip(y, width, height)
        margin_min = min(margin_min, margin)
        below = float(y[strip_h + 2:, :].mean())
        n = frame_index_from_ms(ms, fps)
        frames.append({
            "i": i,
            "pts": pts[i] if i < len(pts) else None,
            "t": float(pts[i] * tb) if i < len(pts) and pts[i] is not None else None,
            "ms": ms, "n": n,
            "flash": below > FLASH_THRESHOLD,
            "luma_below": round(below, 1),
        })

    # the output timestamps: they must sit on a grid of exactly one frame duration
    grid_errors = []
    if pts and None not in pts:
        for i, p in enumerate(pts):
            want = pts[0] + round(i * frame_ticks)
            if p != want:
                grid_errors.append({"i": i, "pts": p, "expected": want, "diff_ticks": p - want})
    n_frames = len(frames)
    last = pts[-1] if pts and pts[-1] is not None else None
    end_ticks = (last + frame_ticks) if last is not None else None
    return {
        "width": width, "height": height, "fps": _fstr(fps), "fps_from_pts": _fstr(mode_fps),
        "frame_ms": frame_ms, "time_base": _fstr(tb),
        "frame_ticks": float(frame_ticks),
        "frame_count": n_frames, "ffprobe_frame_count": len(pts),
        "first_pts": pts[0] if pts else None, "last_pts": last,
        "pts_steps": sorted(set(steps)),
        "pts_grid_errors": grid_errors[:20], "pts_grid_error_count": len(grid_errors),
        "start": float(pts[0] * tb) if pts and pts[0] is not None else None,
        "end": float(end_ticks * tb) if end_ticks is not None else None,
        "duration": float((end_ticks - pts[0]) * tb) if end_ticks is not None else None,
        "strip_margin_min": round(margin_min, 1),
        "invalid_timecodes": [f["i"] for f in frames if f["n"] is None][:20],
        "flash_count": sum(f["flash"] for f in frames),
        "flash_mismatches": [f["i"] for f in frames
                             if f["n"] is not None and f["flash"] != is_flash_index(f["n"], fps)][:20],
        "frames": frames,
        "_fps": fps, "_tb": tb,
    }


def _segments(video):
    """Runs of frames whose source frame index advances by exactly one. With
    ms = floor(n*1000/fps) this is the same as 'ms advances by about one frame
    duration' but exact (no tolerance needed for the floor)."""
    fps = video["_fps"]
    frames = video["frames"]
    segs, jumps = [], []
    cur = None
    for f in frames:
        if cur is not None and f["n"] is not None and cur["_last_n"] is not None \
                and f["n"] == cur["_last_n"] + 1:
            cur["_last_n"] = f["n"]
            cur["last_ms"] = f["ms"]
            cur["last_i"] = f["i"]
            cur["frames"] += 1
            continue
        if cur is not None:
            segs.append(cur)
        cur = {"first_i": f["i"], "last_i": f["i"], "first_ms": f["ms"], "last_ms": f["ms"],
               "first_n": f["n"], "_last_n": f["n"], "frames": 1, "out_start": f["t"]}
    if cur is not None:
        segs.append(cur)
    for s in segs:
        s["last_n"] = s.pop("_last_n")
        s["source_start"] = float(Fraction(s["first_n"]) / fps) if s["first_n"] is not None else None
        # the source span the segment covers: [t_first, t_last + one frame)
        s["source_end"] = float(Fraction(s["last_n"] + 1) / fps) if s["last_n"] is not None else None
    for a, b in zip(segs, segs[1:]):
        if a["last_n"] is None or b["first_n"] is None:
            jumps.append({"at_frame": b["first_i"], "out_time": b["out_start"], "pause_ms": None,
                          "pause_frames": None, "raw_ms_jump": b["first_ms"] - a["last_ms"]})
            continue
        frames_skipped = b["first_n"] - a["last_n"] - 1
        jumps.append({
            "at_frame": b["first_i"], "out_time": b["out_start"],
            "pause_frames": frames_skipped,
            # source-time jump minus one frame duration, exact
            "pause_ms": float(Fraction(frames_skipped) / fps * 1000),
            "raw_ms_jump": b["first_ms"] - a["last_ms"],
            "window_source": [a["source_end"], b["source_start"]],
        })
    return segs, jumps


# ----------------------------------------------------------------------------
# audio

def _decode_audio(path, channels):
    rc, out, err = _run(["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-map", "0:a:0",
                         "-f", "s16le", "-acodec", "pcm_s16le", "-"], binary=True)
    pcm = np.frombuffer(out, dtype="<i2")
    pcm = pcm[: len(pcm) - len(pcm) % channels].reshape(-1, channels)
    return pcm, err.strip()


def _moving_mean(x, L):
    """Centred moving mean over L samples (window [i - L//2, i - L//2 + L))."""
    c = np.concatenate(([0.0], np.cumsum(x)))
    n = len(x)
    lo = np.clip(np.arange(n) - L // 2, 0, n)
    hi = np.clip(lo + L, 0, n)
    return (c[hi] - c[lo]) / L


def find_beeps(x, rate):
    """1 kHz beep detection on float samples x (full scale 1.0).

    Quadrature demodulation at 1 kHz, averaged over one period centred on each
    sample, gives the tone's amplitude envelope; for a tone switched on at
    sample s it rises from 0 at s - L/2 to the plateau at s + L/2, so the
    crossing of half the plateau (linearly interpolated) is the onset
    (~0.1 ms). The tone's phase over the plateau then pins the onset to a
    fraction of a sample: a beep starts at phase 0 (sin), so the phase gives
    the onset modulo 1 ms; the candidate nearest the envelope onset is taken
    when it agrees within 0.2 ms (`phase_ok`). A beep cut by a resume starts
    at another phase, so it keeps the envelope onset and phase_ok is false.
    AAC pre-echo is far below half the plateau and is ignored: only regions
    above 0.1 full scale that last at least 2 ms count."""
    n = len(x)
    if n == 0:
        return []
    idx = np.arange(n, dtype=np.float64)
    w = 2 * np.pi * BEEP_FREQ / rate
    c, s = np.cos(w * idx), np.sin(w * idx)
    xi, xq = x * c, x * s
    L = max(1, int(round(rate / BEEP_FREQ)))
    env = 2 * np.hypot(_moving_mean(xi, L), _moving_mean(xq, L))

    mask = env > 0.1
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    regions = list(zip(edges[0::2], edges[1::2]))          # [start, end)
    merged = []
    gap = int(0.003 * rate)
    for r in regions:
        if merged and r[0] - merged[-1][1] < gap:
            merged[-1] = (merged[-1][0], r[1])
        else:
            merged.append(r)
    beeps = []
    period = rate / BEEP_FREQ
    for a, b in merged:
        if b - a < int(0.002 * rate):
            continue
        inner = env[a + (b - a) // 4: b - (b - a) // 4] if b - a > 8 else env[a:b]
        plateau = float(np.median(inner))
        half = plateau / 2
        # onset: first upward crossing of half the plateau in the region
        i = a + int(np.argmax(env[a:b] >= half))
        onset_env = float(i) if i == 0 else (i - 1) + (half - env[i - 1]) / (env[i] - env[i - 1])
        # end: last sample above half, interpolated with the next one
        j = a + int(np.flatnonzero(env[a:b] >= half)[-1])
        if j + 1 < n and env[j] != env[j + 1]:
            end = j + (env[j] - half) / (env[j] - env[j + 1])
        else:
            end = float(j + 1)
        # phase over the plateau (away from both edges)
        p0, p1 = int(onset_env + L), int(end - L)
        onset_phase, phase_ok = None, False
        if p1 - p0 > 2 * L:
            mi, mq = float(xi[p0:p1].mean()), float(xq[p0:p1].mean())
            # x = A sin(w (t - s)) -> mean(x cos) = -A/2 sin(ws), mean(x sin) = A/2 cos(ws)
            ws = math.atan2(-mi, mq) % (2 * math.pi)
            s0 = ws / w
            k = round((onset_env - s0) / period)
            onset_phase = s0 + k * period
            phase_ok = bool(abs(onset_phase - onset_env) < 0.0002 * rate)
        onset = onset_phase if phase_ok else onset_env
        beeps.append({
            "onset_sample": onset, "onset_env_sample": onset_env,
            "onset_phase_sample": onset_phase, "phase_ok": phase_ok,
            "end_sample": end, "duration_ms": (end - onset) * 1000 / rate,
            "amplitude": plateau,
        })
    return beeps


def _audio(path, streams, aframes):
    a = streams["audio"]
    rate, ch = a["sample_rate"], a["channels"]
    pcm, err = _decode_audio(path, ch)
    tb = _frac(a["time_base"])
    first_pts = aframes[0]["pts"] if aframes and aframes[0]["pts"] is not None else None
    # output time of sample 0: the first decoded frame's pts (the decoder has
    # already dropped the AAC priming the edit list / skip-samples asked for)
    start = float(first_pts * tb) if first_pts is not None else (a["start_time"] or 0.0)
    gaps = []
    for f0, f1 in zip(aframes, aframes[1:]):
        if f0["pts"] is None or f1["pts"] is None:
            continue
        want = f0["pts"] + Fraction(f0["nb_samples"], rate) / tb
        if f1["pts"] != want:
            gaps.append({"pts": f1["pts"], "expected": float(want),
                         "gap_ms": float((f1["pts"] - want) * tb * 1000)})
    x = pcm[:, 0].astype(np.float64) / 32768.0 if len(pcm) else np.zeros(0)
    chan_diff = int(np.abs(pcm.astype(np.int32) - pcm[:, :1].astype(np.int32)).max()) \
        if len(pcm) and ch > 1 else 0
    beeps = find_beeps(x, rate)
    for b in beeps:
        b["onset"] = start + b["onset_sample"] / rate
        b["end"] = start + b["end_sample"] / rate
        b["truncated"] = b["duration_ms"] < 97.0
        b["split_at_resume"] = False
        b["onset_sample"] = round(b["onset_sample"], 2)
        b["onset_env_sample"] = round(b["onset_env_sample"], 2)
        if b["onset_phase_sample"] is not None:
            b["onset_phase_sample"] = round(b["onset_phase_sample"], 2)
        b["duration_ms"] = round(b["duration_ms"], 3)
        b["amplitude"] = round(b["amplitude"], 4)
    nsamp = int(len(pcm))
    return {
        "sample_rate": rate, "channels": ch, "samples": nsamp,
        "duration": nsamp / rate if rate else None,
        "start": start, "stream_start_time": a["start_time"],
        "end": start + nsamp / rate if rate else None,
        "frame_pts_gaps": gaps[:20], "frame_pts_gap_count": len(gaps),
        "ffprobe_samples": sum(f["nb_samples"] for f in aframes),
        "max_channel_difference": chan_diff,
        "decode_stderr": err,
        "beeps": beeps,
    }


def _split_at_resumes(audio, jumps, frames, frame_s):
    """One tone across a resume is two beeps. A pause that began during a beep joins that
    beep's head to whatever tone the resume starts with, with no dip between, and find_beeps
    sees one long tone. Split it where the second beep begins. When the resume's first frame
    is a flash, the second is a whole beep: split at its end minus the contract's 100 ms if
    that lies within a frame of the resume (its onset still measured on the audio, so an A/V
    offset shows). Otherwise the resume cut into a beep (its flash fell in the pause) and
    the tone's second part is that beep's tail: split at the resume itself, which _sync files
    as a beep cut by the resume. (The end alone cannot tell them apart: at 30 fps a 66.7 ms
    head and a 66.7 ms tail end 33.3 ms, one frame, after a whole beep from the resume would.)"""
    rate, start = audio["sample_rate"], audio["start"]
    resumes = sorted((j["out_time"], frames[j["at_frame"]]["flash"])
                     for j in jumps if j["out_time"] is not None)
    margin = 0.003
    out = []
    for b in audio["beeps"]:
        cur = b
        while cur["end"] - cur["onset"] > BEEP_SECONDS + margin:
            r, flash = next(((r, f) for r, f in resumes if cur["onset"] + margin < r < cur["end"] - margin),
                            (None, False))
            if r is None:
                break
            e = cur["end"] - BEEP_SECONDS
            cut = e if flash and abs(e - r) <= frame_s + 0.002 else r
            head = dict(cur, end=cut, end_sample=round((cut - start) * rate, 2),
                        duration_ms=round((cut - cur["onset"]) * 1000, 3), split_at_resume=True)
            head["truncated"] = head["duration_ms"] < 97.0
            out.append(head)
            cur = dict(cur, onset=cut, onset_sample=round((cut - start) * rate, 2),
                       onset_env_sample=round((cut - start) * rate, 2), onset_phase_sample=None,
                       phase_ok=False, duration_ms=round((cur["end"] - cut) * 1000, 3),
                       split_at_resume=True)
            cur["truncated"] = cur["duration_ms"] < 97.0
        out.append(cur)
    audio["beeps"] = out


# ----------------------------------------------------------------------------
# sync

def _sync(video, audio, jumps):
    frame_s = video["frame_ms"] / 1000
    flashes = [f for f in video["frames"] if f["flash"]]
    beeps = audio["beeps"] if audio else []
    onsets = np.array([b["onset"] for b in beeps]) if beeps else np.zeros(0)
    pairs, unpaired_flashes, used = [], [], set()
    for f in flashes:
        if not len(onsets):
            unpaired_flashes.append({"i": f["i"], "t": f["t"], "ms": f["ms"]})
            continue
        k = int(np.argmin(np.abs(onsets - f["t"])))
        off = float(onsets[k] - f["t"])
        if abs(off) > PAIR_WINDOW_S:
            unpaired_flashes.append({"i": f["i"], "t": f["t"], "ms": f["ms"],
                                     "nearest_beep_ms": round(off * 1000, 3)})
            continue
        used.add(k)
        pairs.append({"frame": f["i"], "source_ms": f["ms"], "t": f["t"],
                      "beep_onset": beeps[k]["onset"], "offset_ms": round(off * 1000, 3)})
    # a beep with no flash is only legitimate when a resume cut it: its onset
    # then sits on the segment boundary (the flash frame fell in the pause)
    resumes = [j["out_time"] for j in jumps if j["out_time"] is not None]
    unpaired_beeps, cut_beeps = [], []
    for k, b in enumerate(beeps):
        if k in used:
            continue
        at_resume = any(abs(b["onset"] - r) <= frame_s + 0.002 for r in resumes)
        entry = {"onset": b["onset"], "duration_ms": b["duration_ms"], "phase_ok": b["phase_ok"]}
        if at_resume and b["truncated"]:
            # cut short by the resume: its flash fell in the pause, and the flash before the
            # pause may well lie within reach (a pause that cut that flash's own beep)
            cut_beeps.append(entry)
            continue
        near = [f for f in flashes if abs(f["t"] - b["onset"]) <= PAIR_WINDOW_S]
        if near:            # a flash within reach, but it paired with a nearer beep
            unpaired_beeps.append({"onset": b["onset"], "reason": "second beep near one flash"})
            continue
        (cut_beeps if at_resume else unpaired_beeps).append(entry)
    offs = [p["offset_ms"] for p in pairs]
    slope = None
    if len(pairs) >= 3:
        ts = np.array([p["t"] for p in pairs])
        if ts.max() - ts.min() > 1.0:
            # offset drift per second of output, in ppm (a recorder that counts
            # skewed samples at the nominal rate shows the skew here)
            slope = round(float(np.polyfit(ts, np.array(offs) / 1000, 1)[0]) * 1e6, 1)
    return {
        "pairs": pairs,
        "max_abs_offset_ms": max((abs(o) for o in offs), default=None),
        "mean_offset_ms": (sum(offs) / len(offs)) if offs else None,
        "offset_drift_ppm": slope,
        "unpaired_flashes": unpaired_flashes,
        "unpaired_beeps": unpaired_beeps,
        "cut_beeps_at_resume": cut_beeps,
    }


def _xerror(path):
    rc, out, err = _run(["ffmpeg", "-nostdin", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
    msgs = [line for line in err.splitlines() if line.strip()]
    if rc != 0 and not msgs:
        msgs = [f"ffmpeg exited with status {rc}"]
    return msgs


# ----------------------------------------------------------------------------

def analyze(path):
    """Full report of one recording (a dict; JSON-serialisable)."""
    streams = _streams(path)
    report = {"file": path, "streams": streams, "video": None, "segments": [], "jumps": [],
              "audio": None, "sync": None, "errors": _xerror(path)}
    vframes, aframes = _frames(path)
    if streams["video"]:
        video = _video(path, streams, vframes)
        segs, jumps = _segments(video)
        report["video"], report["segments"], report["jumps"] = video, segs, jumps
    if streams["audio"]:
        report["audio"] = _audio(path, streams, aframes)
    if report["video"] and report["audio"]:
        _split_at_resumes(report["audio"], report["jumps"], report["video"]["frames"],
                          report["video"]["frame_ms"] / 1000)
    if report["video"]:
        report["sync"] = _sync(report["video"], report["audio"], report["jumps"])
        del report["video"]["_fps"], report["video"]["_tb"]
    return report


def defects_cut_short(report):
    """defects() of a recording cut short at a fragment (a crash, a full disk), which ends with
    the audio past the video by the encoder's delay: AAC leaves at once, x264 a lookahead later,
    and the writer keeps that audio rather than trimming it. So the audio may end later, and a
    beep past the video's end has no flash; everything else must hold, to the last frame."""
    v, sy = report["video"], report["sync"]
    v_end = ((v["start"] or 0) + v["duration"]) if v and v["duration"] is not None else None
    def past_video(d):
        return (d.startswith("beeps without a flash") and v_end is not None and sy is not None
                and all(b["onset"] >= v_end - 0.002 for b in sy["unpaired_beeps"]))
    return [d for d in defects(report) if not d.startswith("audio ends at") and not past_video(d)]


def defects(report, sync_tolerance_ms=None):
    """Violations of what holds for *every* correct recording of the test sources.
    sync_tolerance_ms defaults to half a frame (500/fps ms)."""
    out = []
    st, v, a, sy = report["streams"], report["video"], report["audio"], report["sync"]
    if report["errors"]:
        out.append(f"decode errors (-xerror): {report['errors'][:3]}")
    if not st["video"] or not v:
        return out + ["no video stream"]
    if not st["audio"] or not a:
        out.append("no audio stream")
    sv = st["video"]
    if sv["codec"] != "h264" or sv["profile"] != "High":
        out.append(f"video is {sv['codec']} {sv['profile']}, want h264 High")
    if sv["pix_fmt"] != "yuv420p":
        out.append(f"pix_fmt {sv['pix_fmt']}, want yuv420p")
    if st["audio"] and (st["audio"]["codec"] != "aac" or st["audio"]["profile"] != "LC"):
        out.append(f"audio is {st['audio']['codec']} {st['audio']['profile']}, want aac LC")
    if v["frame_count"] != v["ffprobe_frame_count"]:
        out.append(f"decoded {v['frame_count']} frames but ffprobe lists {v['ffprobe_frame_count']}")
    if v["pts_grid_error_count"]:
        out.append(f"{v['pts_grid_error_count']} video pts off the one-frame grid "
                   f"(steps seen {v['pts_steps']}; first {v['pts_grid_errors'][:3]})")
    if v["fps_from_pts"] and v["fps"] != v["fps_from_pts"]:
        out.append(f"r_frame_rate {v['fps']} disagrees with the pts steps ({v['fps_from_pts']})")
    if v["invalid_timecodes"]:
        out.append(f"unreadable or foreign timecodes at frames {v['invalid_timecodes'][:10]}")
    if v["flash_mismatches"]:
        out.append(f"flash where the timecode says none (or the reverse) at frames {v['flash_mismatches'][:10]}")
    segs = report["segments"]
    if segs and segs[0]["first_ms"] != 0:
        out.append(f"first frame's source time is {segs[0]['first_ms']} ms, want 0")
    for j in report["jumps"]:
        if j["pause_frames"] is None or j["pause_frames"] < 0:
            out.append(f"source time goes backwards or is unreadable at frame {j['at_frame']} "
                       f"(raw jump {j['raw_ms_jump']} ms)")
        elif j["pause_frames"] == 0:
            out.append(f"source frame repeated at frame {j['at_frame']}")
    if a:
        if a["frame_pts_gap_count"]:
            out.append(f"{a['frame_pts_gap_count']} gaps/overlaps in audio frame timestamps: {a['frame_pts_gaps'][:3]}")
        if v["duration"] is not None and a["duration"] is not None:
            # Compare where each stream *ends* on the output timeline. FFmpeg 5.1 reads the
            # edit list of a fragmented MP4 as a time offset, so it decodes the AAC encoder's
            # 1024 priming samples before t=0 (a player that honours the edit list skips them);
            # counting them as duration would misstate what plays.
            a_end = a["start"] + a["duration"]
            v_end = (v["start"] or 0) + v["duration"]
            diff = abs(a_end - v_end) * a["sample_rate"]
            if diff > AAC_FRAME:
                # a file cut short (crash, full disk) keeps audio up to x264's delay past its video
                why = "; a file cut short by a crash or a full disk ends so" if a_end > v_end else ""
                out.append(f"audio ends at {a_end:.4f} s, video at {v_end:.4f} s "
                           f"({diff:.0f} samples apart, more than one AAC frame{why})")
        if abs(a["start"] - (v["start"] or 0)) * 1000 > v["frame_ms"]:
            out.append(f"audio starts at {a['start']:.4f} s, video at {v['start']:.4f} s")
        if a["max_channel_difference"] > 64:
            out.append(f"channels differ (max |ch - ch0| = {a['max_channel_difference']})")
    if sy:
        tol = sync_tolerance_ms if sync_tolerance_ms is not None else v["frame_ms"] / 2
        bad = [p for p in sy["pairs"] if abs(p["offset_ms"]) > tol]
        if bad:
            out.append(f"{len(bad)} flash/beep pairs off by more than {tol:.1f} ms "
                       f"(max {sy['max_abs_offset_ms']} ms; first {bad[:3]})")
        if sy["unpaired_flashes"]:
            out.append(f"flashes without a beep: {sy['unpaired_flashes'][:5]}")
        if sy["unpaired_beeps"]:
            out.append(f"beeps without a flash (not at a resume): {sy['unpaired_beeps'][:5]}")
    return out


def merge_undone(pauses, undone):
    """The pauses a file must show once the undone takes (source spans (start, end) removed by
    `reelctl undo`) are gone: an undone take counts as pause and joins the pauses it touches or
    overlaps. Twin of PauseWindow.merging (reelctl verify --undone)."""
    out = []
    for p, r in sorted(list(pauses) + list(undone)):
        if out and not out[-1][1] < p:
            out[-1] = (out[-1][0], max(out[-1][1], r))
        else:
            out.append((p, r))
    return out


def schedule_defects(report, pauses, tol_pos_s, tol_len_s, stop_s=None, tol_stop_s=None):
    """Checks against a known schedule. pauses: [(pause_s, resume_s)] in source
    time (seconds after start). A correct recording has len(pauses)+1 segments;
    each jump equals resume - pause within tol_len_s; each segment ends at its
    pause and the next starts at its resume within tol_pos_s; no frame starts
    inside [pause + tol_pos_s, resume - tol_pos_s). With stop_s, the last
    segment ends at stop_s within tol_stop_s. For an exact schedule pass 0."""
    out = []
    v, segs, jumps = report["video"], report["segments"], report["jumps"]
    if not v:
        return ["no video"]
    fps = Fraction(v["fps"])
    eps = 1e-9
    if len(segs) != len(pauses) + 1:
        out.append(f"{len(segs)} segments, want {len(pauses) + 1} "
                   f"(source ms ranges {[(s['first_ms'], s['last_ms']) for s in segs]})")
    for k, ((p, r), j) in enumerate(zip(pauses, jumps)):
        if j["pause_ms"] is None or abs(j["pause_ms"] / 1000 - (r - p)) > tol_len_s + eps:
            out.append(f"pause {k}: jump {j['pause_ms']} ms, measured pause {(r - p) * 1000:.1f} ms "
                       f"(tolerance {tol_len_s * 1000:.1f} ms)")
    for k, (p, r) in enumerate(pauses):
        inside = [f for f in v["frames"] if f["n"] is not None
                  and p + tol_pos_s - eps <= f["n"] / fps < r - tol_pos_s - eps]
        if inside:
            out.append(f"pause {k} [{p:.4f}, {r:.4f}) s: {len(inside)} frames from inside it, "
                       f"source ms {[f['ms'] for f in inside][:8]} at output frames {[f['i'] for f in inside][:8]}")
        if k + 1 < len(segs):
            a, b = segs[k], segs[k + 1]
            if a["source_end"] is None or abs(a["source_end"] - p) > tol_pos_s + eps:
                out.append(f"segment {k} ends at source {a['source_end']} s, paused at {p:.4f} s "
                           f"(tolerance {tol_pos_s * 1000:.1f} ms)")
            if b["source_start"] is None or abs(b["source_start"] - r) > tol_pos_s + eps:
                out.append(f"segment {k + 1} starts at source {b['source_start']} s, resumed at {r:.4f} s "
                           f"(tolerance {tol_pos_s * 1000:.1f} ms)")
    if stop_s is not None and segs:
        end = segs[-1]["source_end"]
        if end is None or abs(end - stop_s) > tol_stop_s + eps:
            out.append(f"last segment ends at source {end} s, stopped at {stop_s:.4f} s "
                       f"(tolerance {tol_stop_s * 1000:.1f} ms)")
    return out


def summary(report):
    """The report without the per-frame list (for logs and test diagnostics)."""
    r = dict(report)
    if r.get("video"):
        r["video"] = {k: v for k, v in r["video"].items() if k != "frames"}
    return r


def format_report(report):
    st, v, a, sy = report["streams"], report["video"], report["audio"], report["sync"]
    L = [f"file: {report['file']}"]
    if st["video"]:
        s = st["video"]
        L.append(f"video: {s['codec']} {s['profile']} {s['pix_fmt']} {s['width']}x{s['height']} "
                 f"tb={s['time_base']} start={s['start_time']} r_frame_rate={s['r_frame_rate']}")
    if st["audio"]:
        s = st["audio"]
        L.append(f"audio: {s['codec']} {s['profile']} {s['sample_rate']} Hz x{s['channels']} "
                 f"tb={s['time_base']} start={s['start_time']}")
    if v:
        L.append(f"frames: {v['frame_count']} at {v['fps']} fps (frame {v['frame_ms']:.3f} ms, "
                 f"{v['frame_ticks']:g} ticks); pts {v['first_pts']}..{v['last_pts']} steps {v['pts_steps']}; "
                 f"off-grid {v['pts_grid_error_count']}")
        L.append(f"video: {v['start']:.6f} .. {v['end']:.6f} s (duration {v['duration']:.6f} s); "
                 f"flashes {v['flash_count']}; strip margin {v['strip_margin_min']}")
    L.append(f"segments: {len(report['segments'])}")
    for k, s in enumerate(report["segments"]):
        L.append(f"  #{k}: frames {s['first_i']}..{s['last_i']} ({s['frames']}), source ms "
                 f"{s['first_ms']}..{s['last_ms']}, out {s['out_start']:.4f} s")
    for j in report["jumps"]:
        L.append(f"  jump at frame {j['at_frame']} (out {j['out_time']:.4f} s): pause "
                 f"{j['pause_ms']} ms ({j['pause_frames']} frames)")
    if a:
        L.append(f"audio: {a['samples']} samples = {a['duration']:.6f} s from {a['start']:.6f} s; "
                 f"frame gaps {a['frame_pts_gap_count']}; beeps {len(a['beeps'])}")
        for b in a["beeps"]:
            L.append(f"  beep at {b['onset']:.5f} s, {b['duration_ms']:.2f} ms, amp {b['amplitude']}, "
                     f"phase_ok={b['phase_ok']}")
    if sy:
        L.append(f"sync: max |offset| {sy['max_abs_offset_ms']} ms over {len(sy['pairs'])} pairs; "
                 f"drift {sy['offset_drift_ppm']} ppm")
        for p in sy["pairs"]:
            L.append(f"  flash src {p['source_ms']} ms at {p['t']:.4f} s: offset {p['offset_ms']:+.3f} ms")
        for key in ("unpaired_flashes", "unpaired_beeps", "cut_beeps_at_resume"):
            if sy[key]:
                L.append(f"  {key}: {sy[key]}")
    L.append(f"errors: {report['errors'] or 'none'}")
    d = defects(report)
    L.append("defects: " + ("none" if not d else ""))
    L.extend(f"  - {x}" for x in d)
    return "\n".join(L)


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, Fraction):
        return _fstr(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 1 or any(a not in ("--json",) for a in argv[1:] if a.startswith("--")):
        print("usage: reel_verify.py FILE [--json]", file=sys.stderr)
        return 2
    rep = analyze(args[0])
    if "--json" in argv:
        rep["defects"] = defects(rep)
        print(json.dumps(rep, default=_json_default))
    else:
        print(format_report(rep))
    return 1 if defects(rep) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
