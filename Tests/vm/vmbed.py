"""Host side of the real-driver test bed (scripts/vm/): run a scenario in the VM and read
what it brought back, plus the signals the scenarios play and how to find them again.

    res = run_scenario("drivers", files=[tone_wav], env={"X": "1"}, timeout=180)
    res.rc, res.out (a dir), res.path("loop.wav"), res.text("scenario.log"), res.tail()

Only the standard library and numpy."""

import os
import subprocess
import wave
from dataclasses import dataclass

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RUN = os.path.join(REPO, "scripts", "vm", "run")
SCENARIOS = os.path.join(REPO, "scripts", "vm", "scenarios")
OUT_ROOT = os.path.join(REPO, ".build", "vm", "test-out")


@dataclass
class Result:
    name: str
    rc: int
    out: str          # host dir that was /out in the guest
    stderr: str       # scripts/vm/run's own messages

    def path(self, *p):
        return os.path.join(self.out, *p)

    def exists(self, *p):
        return os.path.exists(self.path(*p))

    def text(self, *p):
        with open(self.path(*p), encoding="utf-8", errors="replace") as f:
            return f.read()

    def tail(self, lines=40):
        """The end of the scenario log and of the serial console, for failure messages."""
        parts = [f"scripts/vm/run exit status {self.rc}; files in {self.out}", self.stderr.strip()]
        for f in ("scenario.log", "console.log"):
            if self.exists(f):
                t = self.text(f).splitlines()
                parts.append(f"---- {f} (last {lines} lines) ----\n" + "\n".join(t[-lines:]))
        return "\n".join(p for p in parts if p)


def run_scenario(scenario, out=None, bin_dir=None, files=(), env=None, timeout=240, extra=()):
    """Boot the VM once for `scenario` (a name in scripts/vm/scenarios/ or a path)."""
    path = scenario if os.sep in scenario else os.path.join(SCENARIOS, scenario + ".sh")
    name = os.path.splitext(os.path.basename(path))[0]
    out = out or os.path.join(OUT_ROOT, name)
    argv = [RUN, path, "--quiet", "--out", out, "--timeout", str(timeout)]
    if bin_dir:
        argv += ["--bin", bin_dir]
    for f in files:
        argv += ["--file", f]
    for k, v in (env or {}).items():
        argv += ["--env", f"{k}={v}"]
    argv += list(extra)
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout + 1020)   # + the VM lock wait
    return Result(name, p.returncode, out, (p.stdout + p.stderr).decode("utf-8", "replace"))


# ----------------------------------------------------------------------------------------
# A tone whose pitch steps every second: any second of it names itself (second k has
# frequency STEP_FREQS[k]), so a recording shows which seconds it holds and which it lost.

STEP_FREQS = (500, 700, 900, 1100, 1300, 1500, 1700, 1900)


def step_tone(seconds=5, rate=48000, amplitude=0.5, pad_s=0.5, freqs=STEP_FREQS):
    """int16 samples: second k is a sine at freqs[k] (phase-continuous), then pad_s of
    silence (aplay and the loopback may disturb the last period of a stream: keep it silent)."""
    parts, phase = [], 0.0
    t = np.arange(rate)
    for k in range(seconds):
        f = freqs[k % len(freqs)]
        parts.append(np.sin(phase + 2 * np.pi * f * t / rate))
        phase = (phase + 2 * np.pi * f) % (2 * np.pi)
    parts.append(np.zeros(int(rate * pad_s)))
    return np.round(np.concatenate(parts) * amplitude * 32767).astype("<i2")


def write_wav(path, samples, rate=48000):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(samples, "<i2").tobytes())


def read_wav(path):
    """(int16 samples of the first channel, rate)."""
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2, f"{path}: {8 * w.getsampwidth()}-bit, want 16"
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        return x.reshape(-1, w.getnchannels())[:, 0], w.getframerate()


def dominant_freq(x, rate):
    """Frequency of the strongest bin of a Hann-windowed FFT, refined by parabolic fit."""
    x = np.asarray(x, float)
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    k = int(np.argmax(spec[1:])) + 1
    if 0 < k < len(spec) - 1:
        a, b, c = np.log(spec[k - 1:k + 2] + 1e-12)
        k = k + 0.5 * (a - c) / (a - 2 * b + c)
    return k * rate / len(x)


def pitch_track(x, rate, window_s=0.05, threshold=0.05):
    """[(t_seconds, freq or None)] over consecutive windows; None where the window is
    quieter than `threshold` of full scale (RMS)."""
    n = int(rate * window_s)
    out = []
    for i in range(0, len(x) - n + 1, n):
        w = np.asarray(x[i:i + n], float) / 32768
        rms = float(np.sqrt(np.mean(w * w)))
        out.append((i / rate, dominant_freq(w, rate) if rms >= threshold else None))
    return out


# ----------------------------------------------------------------------------------------
# v4l2-ctl output

def parse_formats(text):
    """`v4l2-ctl --list-formats-ext` -> {fourcc: {"WxH": [fps, ...]}} (discrete sizes)."""
    import re
    fmts, fourcc, size = {}, None, None
    for line in text.splitlines():
        m = re.match(r"\s*\[\d+\]: '(\w+)'", line)
        if m:
            fourcc = m.group(1)
            fmts[fourcc] = {}
            continue
        m = re.match(r"\s*Size: Discrete (\d+x\d+)", line)
        if m and fourcc:
            size = m.group(1)
            fmts[fourcc][size] = []
            continue
        m = re.match(r"\s*Interval: Discrete [\d.]+s \(([\d.]+) fps\)", line)
        if m and fourcc and size:
            fmts[fourcc][size].append(float(m.group(1)))
    return fmts


def parse_dqbuf(text):
    """`v4l2-ctl --verbose --stream-mmap` -> [(sequence, timestamp_s, flags)]."""
    import re
    out = []
    for m in re.finditer(r"cap dqbuf: \d+ seq:\s*(\d+) bytesused: \d+ ts: ([\d.]+).*?\(([^)]*)\)", text):
        out.append((int(m.group(1)), float(m.group(2)), m.group(3)))
    return out


# ----------------------------------------------------------------------------------------
# The step tone in a recording with pauses. Source time s (seconds since the tone began)
# plays STEP_FREQS[floor(s)]. A recording maps output time t to source time; each pause
# adds its length to the offset. `step_runs` reads the runs of one pitch from decoded audio,
# `expected_step_runs` predicts them from a schedule, `compare_step_runs` lines them up.

def step_runs(x, rate, freqs=STEP_FREQS, win_s=0.02, hop_s=0.005, min_run_s=0.03, threshold=0.05):
    """[(t_start, t_end, k)]: output times (window centres) where the pitch is freqs[k];
    k = None for silence. Runs shorter than min_run_s (window straddling an edge) dropped."""
    n, hop = int(rate * win_s), int(rate * hop_s)
    x = np.asarray(x, float) / 32768
    labels = []
    for i in range(0, len(x) - n + 1, hop):
        w = x[i:i + n]
        if np.sqrt(np.mean(w * w)) < threshold:
            labels.append(None)
            continue
        f = dominant_freq(w, rate)
        k = int(np.argmin([abs(f - g) for g in freqs]))
        labels.append(k if abs(f - freqs[k]) < (freqs[1] - freqs[0]) / 2 else -1)
    runs = []
    for j, k in enumerate(labels):
        t = (j * hop + n / 2) / rate
        if runs and runs[-1][2] == k:
            runs[-1][1] = t
        else:
            runs.append([t, t, k])
    runs = [r for r in runs if r[1] - r[0] >= min_run_s]
    merged = []
    for r in runs:                      # rejoin a run split by a dropped straddling window
        if merged and merged[-1][2] == r[2]:
            merged[-1][1] = r[1]
        else:
            merged.append(list(r))
    return [tuple(r) for r in merged]


def expected_step_runs(tone_offset_s, pauses, end_s, n_steps=len(STEP_FREQS)):
    """Runs a correct recording holds. tone_offset_s: source time at output t=0; pauses:
    [(pause_s, resume_s)] in output-start-relative *source* seconds (as the test measured:
    seconds after `start`), end_s: stop in the same clock. Returns [(t_start, t_end, k)]
    in output seconds, k = step index (beyond n_steps the tone is over: not listed)."""
    pieces, out_t = [], 0.0           # (output start, output end, source start) per segment
    starts = [0.0] + [r for _, r in pauses]
    ends = [p for p, _ in pauses] + [end_s]
    for s0, s1 in zip(starts, ends):
        pieces.append((out_t, out_t + (s1 - s0), s0))
        out_t += s1 - s0
    runs = []
    for o0, o1, s0 in pieces:
        a = s0 + tone_offset_s
        b = a + (o1 - o0)
        k = int(np.floor(a))
        while k < b:
            lo, hi = max(a, k), min(b, k + 1)
            if hi > lo and 0 <= k < n_steps:
                t0, t1 = o0 + (lo - a), o0 + (hi - a)
                if runs and runs[-1][2] == k and abs(runs[-1][1] - t0) < 1e-9:
                    runs[-1] = (runs[-1][0], t1, k)
                else:
                    runs.append((t0, t1, k))
            k += 1
    return runs


def tone_offset_from_runs(runs):
    """Source time at output 0, from the first edge k -> k+1 (valid when that edge comes
    before the first pause): the edge's output time t is source time k+1."""
    for (a0, a1, ka), (b0, b1, kb) in zip(runs, runs[1:]):
        if ka is not None and kb == ka + 1 and ka >= 0:
            return kb - (a1 + b0) / 2
    return None


def compare_step_runs(got, want, tol_s):
    """Problems (strings) where the runs differ: count, pitch order, or a boundary off by
    more than tol_s. Silence and unclassified runs in `got` are ignored."""
    got = [r for r in got if r[2] is not None and r[2] >= 0]
    out = []
    if [r[2] for r in got] != [r[2] for r in want]:
        out.append(f"pitch runs {[r[2] for r in got]}, want {[r[2] for r in want]}")
        return out
    for i, (g, w) in enumerate(zip(got, want)):
        # window centres sit up to half a window inside the true edges
        for what, gv, wv in (("start", g[0], w[0]), ("end", g[1], w[1])):
            if abs(gv - wv) > tol_s:
                out.append(f"run {i} (step {w[2]}) {what}s at {gv:.3f} s, want {wv:.3f} s")
    return out
