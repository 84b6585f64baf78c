"""The bed end to end with today's reeld: inside the VM, reeld records its synthetic
sources (--video test --audio test) while reelctl pauses it twice
(scripts/vm/scenarios/synthetic.sh); the file comes back over 9p and the independent oracle
(scripts/reel_verify.py) finds no defect against the schedule the guest timed.

Load: under TCG the guest is several times slower than the host (float-heavy work such as
AAC and the synthetic audio the most), and the machine is shared, so the scenario records
320x180 at 10 fps with x264 superfast (High profile still) and 16 kHz audio: at 48 kHz the
audio alone takes ~70 % of a vCPU and, with other builds on the host, reeld dropped frames
in most runs; at 16 kHz it kept up with the host at load 5. 640x360 at 30 fps does not record in real time under TCG here.
When reeld itself reports dropped frames (the guest fell behind), the run is repeated
once: that is host speed, not the property under test; the note says so."""

import json
import re
from dataclasses import dataclass

import pytest

import reel_verify as rv
import vmbed

SIZE, FPS, PRESET, RATE = "320x180", 10, "superfast", 16000


@dataclass
class Call:
    name: str
    t0: float
    t1: float
    rc: int

    @property
    def mid(self):
        return (self.t0 + self.t1) / 2

    @property
    def half(self):
        return (self.t1 - self.t0) / 2


def read_calls(res):
    calls = []
    for line in res.text("times.txt").splitlines():
        n, t0, t1, rc = line.split()
        calls.append(Call(n, float(t0), float(t1), int(rc)))
    return calls


def dropped_frames(res):
    """From reeld's 'recording finished: ... (N segments, T, F frames, D dropped)' line."""
    m = re.search(r"recording finished: .*?, (\d+) dropped\)", res.text("reeld.log")) \
        if res.exists("reeld.log") else None
    return int(m.group(1)) if m else 0


@pytest.fixture(scope="module")
def synthetic(vm_ready, reel_bin_dir):
    env = {"SIZE": SIZE, "FPS": FPS, "PRESET": PRESET, "RATE": RATE}
    res = vmbed.run_scenario("synthetic", bin_dir=reel_bin_dir, env=env, timeout=300)
    if res.rc == 0 and dropped_frames(res):
        print(f"NOTE: reeld dropped {dropped_frames(res)} frames in the guest (too slow under "
              "TCG on this host now); running the scenario once more")
        res = vmbed.run_scenario("synthetic", bin_dir=reel_bin_dir, env=env, timeout=300)
    assert res.rc == 0, "synthetic scenario failed\n" + res.tail()
    return res


def test_recording_comes_back_complete(synthetic):
    assert synthetic.exists("synth.mp4"), synthetic.tail()
    assert not synthetic.exists("synth.mp4.part")
    during = json.loads(synthetic.text("status-during.json"))
    after = json.loads(synthetic.text("status-after.json"))
    print("status during:", during, "\nstatus after:", after)
    assert during["state"] == "recording" and len(during["segments"]) == 3, during
    assert after["state"] == "idle", after
    assert dropped_frames(synthetic) == 0, \
        f"reeld dropped {dropped_frames(synthetic)} frames in the guest, twice (host too slow?)"
    assert "recording finished: /out/synth.mp4" in synthetic.text("reeld.log")


def test_oracle_finds_no_defect(synthetic):
    """Two pauses, three segments; the jumps equal the pauses measured in the guest (within
    one frame plus half of each reelctl call: the call times are in times.txt), nothing from
    inside a pause, A/V in sync within half a frame, decodes with -xerror clean."""
    calls = {c.name: [] for c in read_calls(synthetic)}
    for c in read_calls(synthetic):
        assert c.rc == 0, f"reelctl {c.name} failed in the guest"
        calls[c.name].append(c)
    start, stop = calls["start"][0], calls["stop"][0]
    pairs = list(zip(calls["pause"], calls["resume"]))
    assert len(pairs) == 2
    frame = 1 / FPS
    pauses = [(p.mid - start.mid, q.mid - start.mid) for p, q in pairs]
    tol_pos = frame + start.half + max(max(p.half, q.half) for p, q in pairs) + 0.002
    tol_len = frame + max(p.half + q.half for p, q in pairs) + 0.002
    tol_stop = 2 * frame + start.half + stop.half + 0.002
    rep = rv.analyze(synthetic.path("synth.mp4"))
    print(rv.format_report(rep))
    print(f"pauses (source s) {[(round(p, 3), round(q, 3)) for p, q in pauses]}; "
          f"tol_pos {tol_pos * 1000:.0f} ms, tol_len {tol_len * 1000:.0f} ms, "
          f"reelctl calls took {[round((c.t1 - c.t0) * 1000) for c in read_calls(synthetic)]} ms")
    problems = rv.defects(rep) + rv.schedule_defects(rep, pauses, tol_pos, tol_len,
                                                     stop_s=stop.mid - start.mid, tol_stop_s=tol_stop)
    w, h = map(int, SIZE.split("x"))
    assert (rep["video"]["width"], rep["video"]["height"]) == (w, h)
    assert rep["audio"]["sample_rate"] == RATE
    assert len(rep["segments"]) == 3, rep["segments"]
    assert not problems, "oracle found:\n  " + "\n  ".join(problems)
