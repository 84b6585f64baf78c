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
                       stderr=subprocess.PIPE, timeout=timeout + 120)
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
