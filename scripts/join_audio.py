"""The sound of the joins between takes (issue 23): known sounds to record and the checks that
find a click or a dip at every join of the decoded file. Shared by the host tier
(Tests/e2e/test_joins.py, through `wav:`) and the VM tier (Tests/vm/test_capture_vm.py, through
snd-aloop).

Sounds (numpy, seeded; speech from espeak-ng):
  tone    347 Hz sine at half scale: off every frame-rate multiple, so a cut on the frame grid
          lands at an arbitrary phase and a pause jumps the phase
  noise   pink noise (1/f power, 20 Hz..20 kHz) at -18 dBFS RMS, seeded
  speech  espeak-ng's voice (22.05 kHz, resampled by ffmpeg), low-passed at 4 kHz (a telephone
          line's band: speech's own second difference then stays small, so a click stands out
          of it), repeated to length, peak -6 dBFS

Criteria (issue 23's "done when", and the speech one chosen here):
  tone    max |second difference| within +-10 ms of a join <= 3 x its 99.9th percentile
          elsewhere (samples more than 20 ms from every join and from the file's ends)
  noise   RMS level of every 4 ms window that contains the join within 6 dB of the median
          4 ms level elsewhere
  speech  the tone's measure on the speech channel, against speech's own 99.9th percentile,
          at joins where the speech is sounding on both sides (RMS over the 10 ms before and
          after the join above -40 dBFS); a join in a pause between words can make no click

The joins are the file's chapter starts after the first (`ffprobe -show_chapters`: a chapter
is a kept take, so an undone take leaves one join where the next take begins). The audio is
the decoder's output with the edit list applied (ffmpeg's default); output time t is decoded
sample round((t - start) * rate), start being the first decoded frame's pts. `align` checks
that on the signal itself: the noise channel of each take is found in the source by
cross-correlation, and the sample where the output stops following one take's source and
starts following the next is the join the signal shows. It must be within 2.5 ms of the
chapter's from a file source (a sound card's periods are stamped as they arrive: there, within
the tolerance the VM tier gives a cut, a frame and 20 ms), and the criteria judge the whole span
between the two.

Only the standard library, numpy and the ffmpeg/ffprobe/espeak-ng CLI are used."""

import json
import os
import shutil
import subprocess
import tempfile
import wave
from fractions import Fraction

import numpy as np

TONE_HZ = 347
TONE_AMP = 0.5
NOISE_DBFS = -18.0
NOISE_SEED = 23
SPEECH_TEXT = ("the quick brown fox jumps over the lazy dog while seven bright wizards quietly "
               "mix the jelly and every shiny vowel sings along without a single stop between words "
               "so the voice keeps sounding through each join of the recording")

NEAR_S = 0.010        # the tone and speech criteria look this far either side of a join
AWAY_S = 0.020        # "elsewhere": further than this from every join and from the file's ends
CLICK_FACTOR = 3.0    # ... within this many times the 99.9th percentile elsewhere
LEVEL_WIN_S = 0.004   # the noise criterion's window
LEVEL_DB = 6.0        # ... within this many dB of the median
SPEECH_ACTIVE_DBFS = -40.0
JOIN_TOL_S = 0.0025   # the signal's join within this of the chapter's


# ----------------------------------------------------------------------------------------------
# sounds

def tone(n, rate, freq=TONE_HZ, amp=TONE_AMP):
    """Sample m is amp * sin(2 pi freq m / rate): source time m / rate, as reeld stamps a WAV."""
    return amp * np.sin(2 * np.pi * freq * np.arange(n) / rate)


def pink_noise(n, rate, seed=NOISE_SEED, dbfs=NOISE_DBFS):
    """Gaussian noise shaped to 1/f power between 20 Hz and 20 kHz, scaled to `dbfs` RMS."""
    rng = np.random.default_rng(seed)
    spec = rng.standard_normal(n // 2 + 1) + 1j * rng.standard_normal(n // 2 + 1)
    f = np.fft.rfftfreq(n, 1 / rate)
    band = (f >= 20) & (f <= 20000)
    spec[~band] = 0
    spec[band] /= np.sqrt(f[band])
    x = np.fft.irfft(spec, n)
    return x * (10 ** (dbfs / 20) / np.sqrt(np.mean(x ** 2)))


def speech(n, rate, text=SPEECH_TEXT, peak=0.5, band_hz=4000):
    """espeak-ng saying `text` (-s 190 words a minute, 0 word gap), resampled to `rate` by
    ffmpeg, low-passed at band_hz, repeated to n samples, peak-normalised. Raises when espeak-ng
    is missing (the Makefile's DEB_PACKAGES installs it).

    Why the low-pass: with espeak-ng's full band (to 11 kHz) a hard cut in speech exceeded 3x
    speech's 99.9th percentile of |second difference| at 1 join in 18 (AAC at 128 kb/s, 30
    random joins, counting those where speech sounds on both sides); low-passed at 4 kHz, at 5 in
    14. A 5 ms equal-power crossfade of the same joins stayed at or below 2.0x and 1.8x."""
    if not shutil.which("espeak-ng"):
        raise RuntimeError("espeak-ng is not installed: sudo apt-get install espeak-ng (make deps does)")
    with tempfile.TemporaryDirectory(prefix="reel-speech-") as d:
        raw, res = os.path.join(d, "raw.wav"), os.path.join(d, "res.wav")
        subprocess.run(["espeak-ng", "-v", "en", "-s", "190", "-g", "0", "-w", raw, text], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", raw, "-ar", str(rate), "-ac", "1",
                        "-c:a", "pcm_s16le", res], check=True, timeout=60)
        x = read_wav(res)[0][:, 0]
    # espeak-ng pads its output with silence: trim it, so the repeats follow each other closely
    loud = np.flatnonzero(np.abs(x) > 0.01)
    x = x[loud[0]:loud[-1] + 1]
    spec = np.fft.rfft(x)
    spec[np.fft.rfftfreq(len(x), 1 / rate) > band_hz] = 0
    x = np.fft.irfft(spec, len(x))
    x = x * (peak / np.max(np.abs(x)))
    return np.tile(x, n // len(x) + 1)[:n]


def write_wav(path, channels, rate):
    """channels: equal-length float arrays (full scale 1.0), one per channel; 16-bit PCM."""
    pcm = np.stack([np.clip(np.round(c * 32767), -32768, 32767) for c in channels], axis=1).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(pcm.shape[1])
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return pcm


def read_wav(path):
    """(float samples (n, channels), rate)."""
    with wave.open(path, "rb") as w:
        ch, rate, n = w.getnchannels(), w.getframerate(), w.getnframes()
        pcm = np.frombuffer(w.readframes(n), dtype="<i2").reshape(-1, ch)
    return pcm.astype(np.float64) / 32768.0, rate


# ----------------------------------------------------------------------------------------------
# the recording

def chapters(path):
    """[(start_s, end_s, title)] as Fractions of seconds, from ffprobe -show_chapters."""
    p = subprocess.run(["ffprobe", "-v", "error", "-show_chapters", "-of", "json", path],
                       capture_output=True, text=True, check=True, timeout=60)
    out = []
    for c in json.loads(p.stdout).get("chapters", []):
        tb = Fraction(c["time_base"])
        out.append((Fraction(c["start"]) * tb, Fraction(c["end"]) * tb, c.get("tags", {}).get("title")))
    return out


def track_end_gap_samples(path, rate):
    """Where the file's audio track ends minus where its video track ends, in audio samples, from
    the container (each track's duration in its own timescale, edit lists applied): what a player
    is told. A decoder's count cannot say it: FFmpeg decodes the last AAC packet whole (1024
    samples) whatever the packet's duration, so decoded audio overshoots by up to 1023 samples."""
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_type,duration_ts,time_base,start_pts",
                          "-of", "json", path], capture_output=True, text=True, check=True).stdout
    st = {s["codec_type"]: s for s in json.loads(out)["streams"] if s["codec_type"] in ("audio", "video")}
    end = {k: (Fraction(v.get("start_pts", 0)) + Fraction(v["duration_ts"])) * Fraction(v["time_base"]) for k, v in st.items()}
    return float((end["audio"] - end["video"]) * rate)


def decode(path):
    """(float samples (n, channels), rate, start_s): the decoder's output with the edit list
    applied, as ffmpeg plays it; start_s is the output time of its first sample."""
    info = json.loads(subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries", "stream=sample_rate,channels,time_base",
         "-show_entries", "frame=pts", "-read_intervals", "%+#4", "-of", "json", path],
        capture_output=True, text=True, check=True, timeout=60).stdout)
    s = info["streams"][0]
    rate, ch = int(s["sample_rate"]), int(s["channels"])
    start = Fraction(int(info["frames"][0]["pts"])) * Fraction(s["time_base"])
    raw = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-map", "0:a:0",
                          "-f", "f32le", "-acodec", "pcm_f32le", "-"], capture_output=True, check=True, timeout=120).stdout
    x = np.frombuffer(raw, dtype="<f4").astype(np.float64)
    return x[: len(x) - len(x) % ch].reshape(-1, ch), rate, start


def join_samples(path, rate, start):
    """The decoded sample index of every join: each chapter start but the first."""
    return [int(round((c[0] - start) * rate)) for c in chapters(path)[1:]]


# ----------------------------------------------------------------------------------------------
# the criteria

def _spans(joins):
    """A join as a span of samples: an index j, or (lo, hi) when the chapter and the signal
    place it apart (both ends and all between are judged)."""
    return [(j, j) if np.isscalar(j) else (min(j), max(j)) for j in joins]


def _elsewhere(n, joins, rate, away=AWAY_S):
    """Mask of samples further than `away` from every join (span) and from both ends."""
    a = int(round(away * rate))
    m = np.zeros(n, dtype=bool)
    m[a:n - a] = True
    for lo, hi in _spans(joins):
        m[max(0, lo - a):hi + a] = False
    return m


def click_ratios(x, joins, rate, near=NEAR_S):
    """For each join (an index or a span): max |second difference| within +-near of it, over
    the 99.9th percentile of |second difference| elsewhere. Returns (ratios, p99.9).
    d2[i] = x[i+1] - 2 x[i] + x[i-1]."""
    d2 = np.zeros(len(x))
    d2[1:-1] = np.abs(x[2:] - 2 * x[1:-1] + x[:-2])
    p = float(np.percentile(d2[_elsewhere(len(x), joins, rate)], 99.9))
    k = int(round(near * rate))
    return [float(d2[max(0, lo - k):hi + k + 1].max()) / p if p > 0 else float("inf")
            for lo, hi in _spans(joins)], p


def level_excursions(x, joins, rate, win=LEVEL_WIN_S):
    """For each join (an index or a span): (lowest, highest) RMS level in dB, relative to the
    median 4 ms level elsewhere, over every window of `win` that contains a sample of the join
    (sliding one sample at a time). Returns (excursions, median dBFS)."""
    L = int(round(win * rate))
    c = np.concatenate(([0.0], np.cumsum(x * x)))
    ms = (c[L:] - c[:-L]) / L                      # ms[s]: mean square of x[s:s+L]
    db = 10 * np.log10(np.maximum(ms, 1e-20))
    away = _elsewhere(len(x), joins, rate)
    starts_ok = away[:len(ms)] & away[L - 1:]       # both ends away: the whole window is
    med = float(np.median(db[starts_ok]))
    out = []
    for lo, hi in _spans(joins):
        w = db[max(0, lo - L + 1):hi + 1]
        out.append((float(w.min()) - med, float(w.max()) - med))
    return out, med


def active(x, j, rate, span=NEAR_S, dbfs=SPEECH_ACTIVE_DBFS):
    """True when the RMS of the `span` before sample j and of the span from it both exceed dbfs."""
    k = int(round(span * rate))
    lv = [10 * np.log10(max(float(np.mean(s * s)), 1e-20)) for s in (x[max(0, j - k):j], x[j:j + k])]
    return min(lv) > dbfs


def quantile_dip(x, rate, q=0.1, win=LEVEL_WIN_S):
    """The level (dB re the median) below which the quietest q % of sliding 4 ms windows of
    x lie: what the noise does by itself, with no join."""
    L = int(round(win * rate))
    c = np.concatenate(([0.0], np.cumsum(x * x)))
    db = 10 * np.log10(np.maximum((c[L:] - c[:-L]) / L, 1e-20))
    return float(np.percentile(db, q) - np.median(db))


# ----------------------------------------------------------------------------------------------
# where the signal says the joins are

def source_lag(out, src, at, length):
    """The lag L for which out[at:at+length] best matches src[at+L:at+L+length] (FFT
    cross-correlation against the whole source), and the normalised correlation there."""
    seg = out[at:at + length]
    nfft = 1 << int(np.ceil(np.log2(len(src) + length)))
    c = np.fft.irfft(np.fft.rfft(src, nfft) * np.conj(np.fft.rfft(seg, nfft)), nfft)[: len(src) - length + 1]
    k = int(np.argmax(c))
    s = src[k:k + length]
    r = float(np.dot(seg, s) / (np.linalg.norm(seg) * np.linalg.norm(s) + 1e-20))
    return k - at, r


def align(out, src, joins, rate, length_s=0.1, search_s=0.15):
    """For the noise channel: the source lag of every take (measured in the middle of each span
    between joins) and their correlations; and for each join the change point the signal shows.
    Near a join the lags are measured again, on 90 ms ending `search_s` before it and 90 ms
    starting `search_s` after it (a sound card's stream may slip against the file played into
    it, as aplay's underruns make it), and the change point is the sample j within +-search_s
    that minimises sum((out - src at the lag before)^2 up to j) + sum((out - src at the lag
    after)^2 from j). Returns (lags, correlations, change points)."""
    n = len(out)
    edges = [0] + list(joins) + [n]
    L = int(round(length_s * rate))
    lags, corr = [], []
    for a, b in zip(edges, edges[1:]):
        at = max(a, (a + b) // 2 - L // 2)
        lag, r = source_lag(out, src, at, min(L, b - at))
        lags.append(lag)
        corr.append(r)
    points = []
    w, m = int(round(search_s * rate)), int(round(0.09 * rate))
    for j in joins:
        before = source_lag(out, src, max(0, j - w - m), min(m, j - w))[0] if j - w > 0 else lags[0]
        after = source_lag(out, src, min(n - 1, j + w), m)[0] if j + w + m <= n else lags[-1]
        i = np.arange(max(0, j - w), min(n, j + w))
        e1 = (out[i] - src[np.clip(i + before, 0, len(src) - 1)]) ** 2
        e2 = (out[i] - src[np.clip(i + after, 0, len(src) - 1)]) ** 2
        cost = np.concatenate(([0.0], np.cumsum(e1))) + (e2.sum() - np.concatenate(([0.0], np.cumsum(e2))))
        points.append(int(i[0] + np.argmin(cost)))
    return lags, corr, points


# ----------------------------------------------------------------------------------------------
# one report for a recording

def check(path, sources, rate_expected=None, join_tol_s=JOIN_TOL_S):
    """Decodes a recording of `sources` and measures it at the joins its chapters name (see
    `measure`)."""
    x, rate, start = decode(path)
    if rate_expected and rate != rate_expected:
        raise AssertionError(f"{path}: audio at {rate} Hz, want {rate_expected}")
    return measure(x, rate, join_samples(path, rate, start), sources, start, join_tol_s)


def measure(x, rate, joins, sources, start=0, join_tol_s=JOIN_TOL_S):
    """Measures decoded audio x (n, channels) at the joins (sample indices). sources:
    {"tone": ch, "noise": ch, "speech": ch} (the channel of each sound; noise is required: it
    finds the joins in the signal) plus "src": the source samples (n, channels) as played.
    The criteria judge each join from the chapter's sample to the signal's change point (both
    ends and all between), and the two must be within join_tol_s: from a file source they are
    one sample, so 2.5 ms (JOIN_TOL_S); from a sound card whose periods are stamped on arrival,
    the VM tier's tolerance for a cut (a frame and 20 ms) is the fair one. At most 150 ms
    (`align` looks no further).
    Returns a dict: joins, change points and source lags (`align`), tone / speech click ratios,
    noise level excursions, and `problems`: every criterion that fails, one line each, naming
    the join, the sound and the figure."""
    src = sources["src"]
    rep = {"rate": rate, "start_s": float(start), "samples": len(x), "joins": list(joins),
           "join_s": [float(start) + j / rate for j in joins], "problems": []}
    P = rep["problems"]
    ch = sources["noise"]
    lags, corr, points = align(x[:, ch], src[:, ch], joins, rate)
    rep.update(lags=lags, corr=corr, change_points=points)
    # Half a 5 ms crossfade: where the signal changes take within a crossfade is a matter of
    # estimate, and AAC's short blocks smear a hard cut's noise over ~3 ms. AAC's priming
    # (1024 samples) or a frame (1600 at 30 fps) off would show; so does audio from inside a
    # pause kept after the outgoing take's cut (seen: 378 and 540 samples after an undo).
    tol = int(round(join_tol_s * rate))
    for k, (j, p) in enumerate(zip(joins, points)):
        if abs(p - j) > tol:
            P.append(f"join {k + 1}: the chapter puts it at sample {j}, the noise changes take at {p} "
                     f"({(p - j) * 1000 / rate:+.2f} ms, limit {join_tol_s * 1000:g} ms): the audio's join is "
                     f"not the video's (priming, chapters, or the outgoing take's audio going on past its cut)")
    spans = [(j, p) for j, p in zip(joins, points)]
    silent = [name for name in ("tone", "noise", "speech") if name in sources
              and float(np.sqrt(np.mean(x[:, sources[name]] ** 2))) < 10 ** (-50 / 20)]
    if silent:
        P.append(f"{', '.join(silent)}: silent in the recording (below -50 dBFS RMS): was the source played?")
    if min(corr, default=1) < 0.7:
        P.append(f"the noise channel does not follow its source (correlations {[round(c, 3) for c in corr]})")
    if "tone" in sources:
        r, p = click_ratios(x[:, sources["tone"]], spans, rate)
        rep["tone"] = {"ratios": r, "p999": p}
        P += [f"tone: click at join {k + 1} (sample {j}): max |2nd difference| {v:.1f}x its 99.9th percentile "
              f"elsewhere ({p:.2e}), limit {CLICK_FACTOR:g}x" for k, (j, v) in enumerate(zip(joins, r)) if v > CLICK_FACTOR]
    if "noise" in sources:
        e, med = level_excursions(x[:, ch], spans, rate)
        rep["noise"] = {"excursions_db": e, "median_dbfs": med}
        P += [f"noise: level at join {k + 1} (sample {j}) goes {lo:+.1f}..{hi:+.1f} dB from its median "
              f"({med:.1f} dBFS), limit +-{LEVEL_DB:g} dB" for k, (j, (lo, hi)) in enumerate(zip(joins, e))
              if lo < -LEVEL_DB or hi > LEVEL_DB]
    if "speech" in sources:
        s = x[:, sources["speech"]]
        r, p = click_ratios(s, spans, rate)
        act = [active(s, j, rate) and active(s, q, rate) for j, q in spans]
        rep["speech"] = {"ratios": r, "p999": p, "active": act}
        P += [f"speech: click at join {k + 1} (sample {j}): max |2nd difference| {v:.1f}x its 99.9th percentile "
              f"elsewhere ({p:.2e}), limit {CLICK_FACTOR:g}x" for k, (j, v, a) in enumerate(zip(joins, r, act))
              if a and v > CLICK_FACTOR]
    return rep


def format_figures(rep):
    """One line per join: where, and each sound's figure."""
    L = []
    for k, j in enumerate(rep["joins"]):
        parts = [f"join {k + 1} at {rep['join_s'][k]:.4f} s (sample {j}, signal {rep['change_points'][k] - j:+d})"]
        if "tone" in rep:
            parts.append(f"tone {rep['tone']['ratios'][k]:.1f}x")
        if "noise" in rep:
            lo, hi = rep["noise"]["excursions_db"][k]
            parts.append(f"noise {lo:+.1f}..{hi:+.1f} dB")
        if "speech" in rep:
            parts.append(f"speech {rep['speech']['ratios'][k]:.1f}x" + ("" if rep["speech"]["active"][k] else " (silent: not judged)"))
        L.append(", ".join(parts))
    return "; ".join(L)
