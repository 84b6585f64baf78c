"""Camera controls through the real binaries where there is no camera: the synthetic source
has no V4L2 controls, so `controls` and `set` are refused with an error that says so, idle or
recording, and the recording is not disturbed; [camera.controls] in the config is read (shown by
--check-config), ignored with a warning for a non-camera source, and a malformed entry stops
reeld naming the file, line and key. (On a real driver: Tests/vm/test_controls_vm.py.)"""

import os
import subprocess

NO_CONTROLS = "reelctl: the test source has no controls; controls need a V4L2 camera"


def test_synthetic_source_has_no_controls(reeld):
    r = reeld("controls")
    for args in (("controls",), ("controls", "--json"), ("set", "brightness=200")):
        c = r.ctl(*args, expect_ok=False)
        assert c.rc == 1 and c.err.startswith(NO_CONTROLS), c
    r.ctl("start", "--name", "nocontrols")
    c = r.ctl("set", "brightness=200", "contrast=10", expect_ok=False)
    assert c.rc == 1 and c.err.startswith(NO_CONTROLS), c
    st = r.status()
    assert st["state"] == "recording" and st["lastError"] is None, st
    stop = r.ctl("stop")
    assert stop.out.strip() == os.path.join(r.out_dir, "nocontrols.mp4")
    # A clean file: FFmpeg decodes every frame without an error.
    p = subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-i", stop.out.strip(), "-f", "null", "-"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_set_usage_errors(reeld):
    r = reeld("controls-usage")
    for args, want in ((("set",), "'set' needs NAME=VALUE"), (("set", "brightness"), "'brightness' is not NAME=VALUE"),
                       (("set", "=3"), "'=3' is not NAME=VALUE"), (("set", "a=1", "a=2"), "a is given twice")):
        c = r.ctl(*args, expect_ok=False)
        assert c.rc == 2 and c.err.startswith("reelctl: " + want), c


def test_camera_controls_in_the_config(reeld, reel_bin_dir, tmp_path):
    conf = tmp_path / "reeld.toml"
    conf.write_text('crf = 23\n\n[camera.controls]\nbrightness = 140\nwhite_balance_automatic = false\npower_line_frequency = "50 Hz"\n')
    env = dict(os.environ, REEL_CONFIG=str(conf))
    reeld_bin = os.path.join(reel_bin_dir, "reeld")
    p = subprocess.run([reeld_bin, "--check-config", "--video", "/dev/video0"], capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout.endswith(f"[camera.controls]\nbrightness = 140  # {conf}:4\nwhite_balance_automatic = false  # {conf}:5\n"
                             f"power_line_frequency = \"50 Hz\"  # {conf}:6\n"), p.stdout
    # With the synthetic source the table is ignored, with a warning; recording works.
    r = reeld("controls-config", config=str(conf))
    assert "[camera.controls] in %s is ignored: the video source is 'test', not a V4L2 camera" % conf in r.log_tail(200)
    r.ctl("start", "--name", "withconfig")
    r.ctl("stop")
    # A malformed entry stops reeld at load, naming file, line and key.
    conf.write_text("[camera.controls]\nbrightness = 1\n\"White Balance\" = 0\n")
    p = subprocess.run([reeld_bin, "--check-config"], capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode != 0
    assert f"{conf}:3: key 'camera.controls.White Balance': 'White Balance' is not a control name" in p.stderr, p.stderr
    assert "(did you mean 'white_balance'?)" in p.stderr, p.stderr


def test_set_reset_clears_what_set_changed(reeld):
    """`reelctl set --reset` (all) and `--reset NAME...`: with nothing set there is nothing to
    clear (all: fine; a name: refused, naming it); NAME=VALUE is a usage error with --reset.
    (Clearing on a real camera, and dropping on another camera: CameraOverridesTests and
    Tests/vm/test_controls_vm.py.)"""
    r = reeld("controls-reset")
    assert r.ctl("set", "--reset").rc == 0
    c = r.ctl("set", "--reset", "brightness", expect_ok=False)
    assert c.rc == 1 and "did not change brightness" in c.err, c
    c = r.ctl("set", "--reset", "brightness=1", expect_ok=False)
    assert c.rc == 2 and "--reset takes control names" in c.err, c
