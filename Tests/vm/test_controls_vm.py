"""Camera controls on a real driver (vivid): scripts/vm/scenarios/capture-controls.sh lists
vivid's controls, sets brightness/contrast/saturation/hue from [camera.controls] and live with
`reelctl set` while recording, and the decoded recording must show each change in its pixels:
mean luma up after brightness, chroma spread gone after saturation=0, luma spread down after
contrast, and back at the defaults. Plus the error texts, and the recording unharmed."""

import json
import os
import subprocess

import numpy as np
import pytest

import vmbed

W, H, FPS, PHASE = 320, 180, 10, 5


@pytest.fixture(scope="module")
def run(vm_ready, reel_bin_dir):
    res = vmbed.run_scenario("capture-controls", bin_dir=reel_bin_dir, env={"PHASE": PHASE}, timeout=300)
    assert res.rc == 0, res.tail(80)
    return res


def times(res):
    r = {}
    for line in res.text("times.txt").splitlines():
        n, a, b, rc = line.split()
        r[n] = (float(a), float(b), int(rc))
    return r


def controls(res, name):
    return {c["name"]: c for c in json.loads(res.text(name))["controls"]}


def test_lists_vivids_controls_with_their_ranges(run):
    idle = controls(run, "controls-idle.json")
    for name, lo, hi, default in (("brightness", 0, 255, 128), ("contrast", 0, 255, 128),
                                  ("saturation", 0, 255, 128), ("hue", -128, 128, 0)):
        c = idle[name]
        assert (c["type"], c["min"], c["max"], c["step"], c["default"]) == ("int", lo, hi, 1, default), c
    # The config is applied at every open, also the brief one of an idle listing.
    assert idle["brightness"]["value"] == 100
    # The other types vivid offers, named as v4l2-ctl names them.
    types = {c["type"] for c in idle.values()}
    assert {"int", "bool", "menu", "intmenu", "button", "bitmask", "int64", "string"} <= types, types
    assert all(isinstance(c["text"], str) for c in idle.values() if c["type"] == "string"), idle
    assert idle["test_pattern"]["menu"][0]["name"] == "75% Colorbar", idle["test_pattern"]
    text = run.text("controls-idle.txt")
    assert "                     brightness 0x00980900 (int)    : min=0 max=255 step=1 default=128 value=100" in text, text


def test_idle_set_wins_over_config_at_the_next_open(run):
    assert run.text("set-idle.txt").strip() == "hue=20"
    rec = controls(run, "controls-recording.json")
    assert rec["hue"]["value"] == 20, rec["hue"]   # config says 0; the idle `set` came later
    assert rec["brightness"]["value"] == 100


def test_errors_name_the_control_and_its_range(run):
    assert run.text("range.rc").strip() == "1" and run.text("unknown.rc").strip() == "1"
    assert run.text("range.err").strip() == (
        "reelctl: cannot set brightness=999 on camera /dev/video0 (vivid): out of range 0...255 (step 1) (see 'reelctl controls')")
    err = run.text("unknown.err").strip()
    assert err.startswith("reelctl: camera /dev/video0 (vivid) has no control 'brightnes' (did you mean brightness"), err
    bad = run.text("badconfig.err").strip()
    assert run.text("badconfig.rc").strip() == "1"
    assert "/tmp/bad.toml:2: [camera.controls] brightnes: camera /dev/video0 (vivid) has no control 'brightnes' (did you mean brightness" in bad, bad
    assert "brightness" in run.text("controls-badconfig.txt")  # controls still work
    st = json.loads(run.text("status-badconfig.json"))
    assert st["state"] == "idle" and "brightnes" in (st["lastError"] or ""), st


def decode(path):
    """(pts seconds, Y, U, V) of every frame, decoded by FFmpeg with -xerror (a damaged stream fails)."""
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "frame=pts_time",
                            "-of", "csv=p=0", path], check=True, capture_output=True, text=True).stdout
    pts = np.array([float(x.split(",")[0]) for x in probe.split()])
    raw = subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough",
                          "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"],
                         check=True, capture_output=True).stdout
    n = len(raw) // (W * H * 3 // 2)
    assert n == len(pts), (n, len(pts))
    f = np.frombuffer(raw, np.uint8).reshape(n, W * H * 3 // 2).astype(np.float64)
    y = f[:, :W * H]
    u = f[:, W * H:W * H * 5 // 4]
    v = f[:, W * H * 5 // 4:]
    return pts, y, u, v


def test_recording_shows_each_change_and_is_unharmed(run):
    path = run.path("controls.mp4")
    pts, y, u, v = decode(path)
    t = times(run)
    start0, start1, _ = t["start"]
    # Each phase: frames surely captured after its `set` returned and before the next began
    # (output time 0 lies between the start call's brackets).
    edges = [("config", None, "bright"), ("bright", "bright", "desat"), ("desat", "desat", "flat"),
             ("flat", "flat", "reset"), ("reset", "reset", None)]
    stats = {}
    for name, after, before in edges:
        lo = (t[after][1] - start0 + 0.3) if after else 0.5
        hi = (t[before][0] - start1 - 0.3) if before else pts[-1] - 0.2
        sel = (pts >= lo) & (pts <= hi)
        assert sel.sum() >= 5, (name, lo, hi, sel.sum())
        stats[name] = dict(luma=y[sel].mean(), luma_spread=y[sel].std(axis=1).mean(),
                           chroma=np.hypot(u[sel] - 128, v[sel] - 128).mean(), frames=int(sel.sum()))
    print(json.dumps(stats, indent=1))
    s = stats
    # brightness 100 -> 160: vivid adds (brightness - 128) to every luma value (clamped to 16...235).
    assert s["bright"]["luma"] > s["config"]["luma"] + 25, s
    # and back to the default 128: the config's 100 was darker than the default.
    assert s["config"]["luma"] < s["reset"]["luma"] - 10 < s["bright"]["luma"] - 20, s
    # saturation 0: no colour left; back at 128 it returns.
    assert s["bright"]["chroma"] > 20 and s["desat"]["chroma"] < 3, s
    assert abs(s["reset"]["chroma"] - s["bright"]["chroma"]) < 0.25 * s["bright"]["chroma"], s
    # contrast 128 -> 40: the bars' luma spread shrinks to about a third.
    assert s["flat"]["luma_spread"] < 0.5 * s["desat"]["luma_spread"], s
    # Unharmed: one segment, no error, frames about every 1/FPS s through every set.
    status = json.loads(run.text("stop.json"))
    assert status["lastError"] is None and len(status["segments"]) == 1, status
    gaps = np.diff(pts)
    assert gaps.max() < 0.5, gaps.max()
    assert len(pts) >= 0.8 * FPS * pts[-1], (len(pts), pts[-1])
