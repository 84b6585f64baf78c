"""`reeld record`: the pipeline without the socket. The synthetic sources unpaced with a fixed
pause schedule in source time: the file must hold exactly the scheduled spans (frame-exact),
in sync, and `reeld` without a subcommand must still be the daemon."""

import os
import subprocess

import reel_verify as rv


def record(bindir, tmp_path, *args, timeout=120):
    out = str(tmp_path / "oneshot.mp4")
    p = subprocess.run([os.path.join(bindir, "reeld"), "record", "--video", "test", "--audio", "test",
                        "--unpaced", "--output", out, *args], capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, REEL_CONFIG="/dev/null"))
    return p, out


def test_scheduled_pauses_are_cut_exactly(reel_bin_dir, tmp_path):
    p, out = record(reel_bin_dir, tmp_path, "--size", "320x180", "--fps", "15", "--duration", "20",
                    "--pause-every", "6", "--pause-for", "1.6")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == out and os.path.exists(out) and not os.path.exists(out + ".part")
    rep = rv.analyze(out)
    # Pauses at 6, 12, 18 s for 1.6 s (24 frames at 15 fps: on the frame grid, so the cuts are
    # exact); the recording stops at 20 s. Zero tolerance: every frame in or out as scheduled.
    sched = rv.schedule_defects(rep, [(6, 7.6), (12, 13.6), (18, 19.6)], 0, 0, stop_s=20, tol_stop_s=0)
    assert not rv.defects(rep) and not sched, rv.defects(rep) + sched
    assert [round(j["pause_ms"]) for j in rep["jumps"]] == [1600, 1600, 1600]
    assert rep["sync"]["max_abs_offset_ms"] < 1.0


def test_record_refuses_to_overwrite_and_needs_a_duration(reel_bin_dir, tmp_path):
    p, out = record(reel_bin_dir, tmp_path, "--size", "320x180", "--fps", "15")
    assert p.returncode == 2 and "--duration" in p.stderr, p.stderr
    open(out, "w").close()
    p, _ = record(reel_bin_dir, tmp_path, "--size", "320x180", "--fps", "15", "--duration", "1")
    assert p.returncode == 1 and "already exists" in p.stderr, p.stderr
    p, _ = record(reel_bin_dir, tmp_path, "--duration", "1", "--pause-every", "2")
    assert p.returncode != 0 and "--pause-for" in p.stderr, p.stderr


def test_reeld_without_a_subcommand_is_the_daemon(reeld):
    r = reeld("compat", size="320x180", fps="15")  # the harness runs plain `reeld --socket ...`
    assert r.status()["state"] == "idle"


def test_record_names_the_daemon_settings_it_does_not_use(reel_bin_dir, tmp_path):
    """A one-shot recording has no socket, hooks, standby or metrics: such a flag is refused
    (exit 2, nothing recorded), such a REEL_* variable is a warning in the log and the recording
    goes ahead, and the metrics file named there is not written."""
    prom = tmp_path / "reel.prom"
    p, out = record(reel_bin_dir, tmp_path, "--size", "320x180", "--fps", "15", "--duration", "1",
                    "--metrics-file", str(prom), "--on-finish", "/bin/true")
    assert p.returncode == 2, p.stderr
    for flag in ("--metrics-file", "--on-finish"):
        assert f"{flag} is a setting of the daemon ('reeld serve'); 'reeld record' does not use it" in p.stderr, p.stderr
    assert not os.path.exists(out) and not os.path.exists(out + ".part") and not prom.exists()

    out = str(tmp_path / "env.mp4")
    p = subprocess.run([os.path.join(reel_bin_dir, "reeld"), "record", "--video", "test", "--audio", "test", "--unpaced",
                        "--size", "320x180", "--fps", "15", "--duration", "1", "--output", out],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, REEL_CONFIG="/dev/null", REEL_METRICS_FILE=str(prom)))
    assert p.returncode == 0, p.stderr
    assert "environment variable REEL_METRICS_FILE is a setting of the daemon ('reeld serve'); 'reeld record' ignores it" in p.stderr, p.stderr
    assert os.path.exists(out) and not prom.exists()
