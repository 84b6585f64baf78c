"""`reeld record`: the pipeline without the socket. The synthetic sources unpaced with a fixed
pause schedule in source time: the file must hold exactly the scheduled spans (frame-exact),
in sync, and `reeld` without a subcommand must still be the daemon."""

import os
import signal
import subprocess
import threading
import time

import reel_verify as rv
import synth


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


def _start_recording(bindir, out, *args):
    """`reeld record` running (paced unless told), once it says it is recording: the Popen, and
    the stderr lines read so far (a thread keeps reading them, so reeld never blocks on a full pipe)."""
    p = subprocess.Popen([os.path.join(bindir, "reeld"), "record", "--output", out, *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, REEL_CONFIG="/dev/null"))
    lines, started = [], threading.Event()

    def pump():
        for line in p.stderr:
            lines.append(line)
            if "recording " in line and ".part" in line:
                started.set()
        started.set()  # ended without starting: the test's asserts say why

    threading.Thread(target=pump, daemon=True).start()
    assert started.wait(60) and p.poll() is None, "".join(lines)
    return p, lines


def _signal_ends_the_recording(bindir, tmp_path, sig, after_s, *args):
    """Sends `sig` `after_s` seconds into a recording: returns the exit status, the time it took to
    end after the signal, the stderr lines and the output path."""
    out = str(tmp_path / f"sig-{int(sig)}.mp4")
    p, lines = _start_recording(bindir, out, *args)
    time.sleep(after_s)  # the scenario: the signal comes this long into the recording
    sent = time.monotonic()
    p.send_signal(sig)
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise AssertionError(f"reeld record still recording 30 s after {signal.Signals(sig).name}:\n" + "".join(lines))
    took = time.monotonic() - sent
    print(f"{signal.Signals(sig).name} {after_s} s into {' '.join(args)}: exit status {rc} {took:.2f} s later")
    return rc, took, "".join(lines), out


def test_sigterm_finishes_a_recording_at_once(reel_bin_dir, tmp_path):
    """SIGTERM 2 s into an 8 s one-shot recording of the synthetic sources (paced) finishes the
    file there, as `stop` does for the daemon: about 2 s decoded, exit status 0, no .part."""
    rc, took, log, out = _signal_ends_the_recording(reel_bin_dir, tmp_path, signal.SIGTERM, 2.0,
                                                    "--video", "test", "--audio", "test", "--size", "320x180",
                                                    "--fps", "15", "--duration", "8")
    assert rc == 0, log
    assert took < 3, f"took {took:.1f} s after SIGTERM\n{log}"
    assert os.path.exists(out) and not os.path.exists(out + ".part"), log
    rep = rv.analyze(out)
    assert not rv.defects(rep), rv.defects(rep)
    assert abs(rep["video"]["duration"] - 2.0) < 0.6, f"{rep['video']['duration']:.3f} s decoded\n{log}"


def test_sigint_finishes_a_long_recording(reel_bin_dir, tmp_path):
    """SIGINT (Ctrl-C) 3 s into a `--duration 3600` recording ends it within a couple of seconds."""
    rc, took, log, out = _signal_ends_the_recording(reel_bin_dir, tmp_path, signal.SIGINT, 3.0,
                                                    "--video", "test", "--audio", "test", "--size", "320x180",
                                                    "--fps", "15", "--duration", "3600")
    assert rc == 0 and took < 3, f"rc {rc}, took {took:.1f} s after SIGINT\n{log}"
    rep = rv.analyze(out)
    assert not rv.defects(rep) and abs(rep["video"]["duration"] - 3.0) < 0.6, (rv.defects(rep), rep["video"]["duration"])


def test_sigterm_finishes_a_file_source_recording(reel_bin_dir, tmp_path):
    """The same with a Y4M + WAV pair read in real time (paced), with and without --duration: the
    signal, not the end of the files or the duration, ends the recording."""
    y4m, wav = synth.write_source_files(str(tmp_path), 12)
    for extra in ([], ["--duration", "10"]):
        work = tmp_path / ("duration" if extra else "files-end")
        os.makedirs(work)
        rc, took, log, out = _signal_ends_the_recording(reel_bin_dir, work, signal.SIGTERM, 2.0,
                                                        "--video", f"y4m:{y4m}", "--audio", f"wav:{wav}", *extra)
        assert rc == 0 and took < 3, f"{extra}: rc {rc}, took {took:.1f} s after SIGTERM\n{log}"
        rep = rv.analyze(out)
        assert not rv.defects(rep) and abs(rep["video"]["duration"] - 2.0) < 0.6, (extra, rv.defects(rep), rep["video"]["duration"])
