"""reeld under a real systemd: the guest boots the host's own /lib/systemd/systemd as PID 1 on the
host's root (read-only 9p, tmpfs overlay), installs reeld as README's "Install on a capture box"
says (make install-files, systemd-sysusers, systemd-tmpfiles, systemctl enable --now) and drives
it: vivid's webcam and the snd-aloop loopback through udev's groups and the unit's device
allow-list, a recording with a pause that outlives WatchdogSec, a reload, `systemctl stop` in the
middle of a recording, socket activation afterwards, and a hung reeld (a frozen capture thread)
killed by the watchdog, restarted, its recording recovered. scripts/vm/scenarios/systemd-unit.sh sets
it up; scripts/vm/guest/systemd-inside.sh runs inside and leaves facts, files and the journal in
/out, which these checks read."""

import json
import os
import re
import subprocess

import numpy as np
import pytest



@pytest.fixture(scope="module")
def booted(systemd_boot):
    # The boot goes on with the upload units' test (conftest.py): this part passed if it got to
    # its last fact, whatever came after it.
    res = systemd_boot
    inside = res.text("inside.log") if res.exists("inside.log") else "(no inside.log)"
    facts = dict(line.split("=", 1) for line in res.text("facts.txt").splitlines() if "=" in line) if res.exists("facts.txt") else {}
    assert facts.get("systemd_inside") == "done", f"{res.tail()}\n---- inside.log ----\n{inside[-4000:]}"
    journal = [json.loads(line) for line in res.text("journal.json").splitlines() if line.strip()]
    return res, facts, journal


@pytest.fixture(scope="module")
def finished(booted):
    """`journalctl -u reeld REEL_EVENT=finished -o json` inside the guest: {REEL_FILE: entry}."""
    res, _, _ = booted
    entries = [json.loads(line) for line in res.text("finished.json").splitlines() if line.strip()]
    by_file = {}
    for e in entries:
        assert e.get("REEL_EVENT") == "finished" and e.get("SYSLOG_IDENTIFIER") == "reeld", e
        assert field(e, "REEL_FILE") not in by_file, f"two finished entries for {field(e, 'REEL_FILE')}"
        by_file[field(e, "REEL_FILE")] = e
    return by_file


def field(entry, name):
    """A journal field as text: journalctl -o json gives a value with unprintable bytes as a list of bytes."""
    v = entry.get(name)
    return bytes(v).decode("utf-8", "replace") if isinstance(v, list) else v


def decodes_clean(path):
    """Asserts `ffmpeg -xerror` decodes the file without a message; returns {codec: duration s} of
    its audio and video streams (a finished file also has a chapter text track, a data stream)."""
    p = subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.returncode == 0 and not p.stdout.strip(), p.stdout
    probe = json.loads(subprocess.run(["ffprobe", "-v", "error", "-show_streams", "-of", "json", path],
                                      stdout=subprocess.PIPE, check=True).stdout)
    return {s["codec_name"]: float(s["duration"]) for s in probe["streams"] if s["codec_type"] in ("audio", "video")}


def reeld_entries(journal):
    return [e for e in journal if e.get("SYSLOG_IDENTIFIER") == "reeld"]


def test_runs_as_the_unit_says(booted):
    _, f, _ = booted
    # udev gave the nodes their groups; the unit's user is in them (sysusers), niced as configured
    assert f["video_node"] == "660 root:video" and f["snd_node"] == "660 root:audio", f
    assert f["user"] == "reel", f
    assert {"video", "audio"} <= set(f["groups"].split(",")), f
    assert f["nice"] == "-10", f
    assert f["socket_mode"] == "660 root:reel" and f["statedir_mode"] == "750 reel:reel", f


def test_control_socket_is_open_to_group_reel_only(booted):
    _, f, _ = booted
    assert "permission denied" in f["nobody_refused"] and "group" in f["nobody_refused"], f
    assert f["member_status_rc"] == "0", "a member of group reel could not use reelctl"


def test_notify_watchdog_reload_and_stop(booted):
    res, f, journal = booted
    assert f["status_text_recording"].startswith("recording "), f     # STATUS= reached systemd
    assert f["pid_after_reload"] == f["main_pid"], "systemctl reload must not restart reeld"
    assert f["two_exists"] == "yes" and f["two_part_left"] == "0", "systemctl stop must finish the recording"
    assert f["stop_result"] == "success" and f["stop_exit_status"] == "0", f
    assert f["socket_after_stop"] == "active", f
    # socket activation started a new reeld after the stop; nothing was restarted by failure
    assert f["activated_pid"] not in ("", "0", f["main_pid"]), f
    assert f["n_restarts"] == "0" and f["final_state"] == "active", f
    show = res.text("show-reeld.txt")
    assert "WatchdogUSec=10s" in show, "the unit's WatchdogSec did not reach systemd"
    everything = res.text("journal-all.txt")
    before_hang = everything.split("capture frozen; waiting for the watchdog")[0]
    assert "watchdog timeout" not in before_hang.lower(), "systemd's watchdog fired: reeld stopped pinging"


def test_watchdog_restarts_a_hung_reeld_and_the_recording_survives(booted):
    res, f, journal = booted
    everything = res.text("journal-all.txt")
    assert f["hung_restarted"] == "yes", f
    assert "reeld.service: Watchdog timeout" in everything, "the restart was not the watchdog's"
    # the SIGABRT ends it at once: no wait for TimeoutAbortSec's SIGKILL (a Swift backtracer that
    # cannot start under the sandbox once hung it until TimeoutStopSec, 150 s)
    assert "State 'stop-watchdog' timed out" not in everything, "reeld did not die of the watchdog's SIGABRT"
    assert f["hung_restart_s"] and float(f["hung_restart_s"]) < 60, f
    assert f["hung_recovered"] == "yes" and f["hung_part_left"] == "0", f
    msgs = [e["MESSAGE"] for e in reeld_entries(journal)]
    assert any("recovered crash-left recording" in m and "hung.mp4" in m for m in msgs), msgs[-20:]
    recovered = [e for e in reeld_entries(journal) if e.get("REEL_EVENT") == "recovered"]
    assert [(e["REEL_FILE"], e["REEL_PART"]) for e in recovered] == [("/var/lib/reel/hung.mp4", "/var/lib/reel/hung.mp4.part")], recovered
    durations = decodes_clean(res.path("hung.mp4"))
    # 4 s were recorded before the freeze; a crash loses at most the open fragment and x264's delay
    assert set(durations) == {"h264", "aac"} and min(durations.values()) >= 2.5, durations


def test_journal_has_reelds_lines_at_their_priorities(booted):
    _, _, journal = booted
    mine = reeld_entries(journal)
    msgs = [e["MESSAGE"] for e in mine]
    assert any(m.startswith("recording finished: /var/lib/reel/one.mp4 (2 segments") for m in msgs), msgs[-20:]
    assert any(m.startswith("recording finished: /var/lib/reel/two.mp4 (1 segment,") for m in msgs), msgs[-20:]
    assert any("SIGHUP: configuration re-read" in m for m in msgs), msgs[-20:]
    assert all("PRIORITY" in e for e in mine), [e for e in mine if "PRIORITY" not in e][:5]
    # up to the test hook's freeze (its stall message is rightly critical)
    freeze = [i for i, m in enumerate(msgs) if "test hook REEL_TEST_FREEZE_CAPTURE" in m]
    mine = mine[:freeze[0]] if freeze else mine
    # Every line came whole through the native protocol (sd_journal_sendv), none through the
    # stderr stream, where journald would cut a multi-line message into entries at the stream's
    # default priority: a multi-line message, if reeld logged one here, is one entry.
    stream = [(e.get("_TRANSPORT"), e["MESSAGE"]) for e in mine if e.get("_TRANSPORT") != "journal" or "CODE_FILE" not in e]
    assert not stream, stream[:10]
    prio = {e["MESSAGE"].split(":")[0]: int(e["PRIORITY"]) for e in mine}
    assert prio.get("recording finished") == 5 and prio.get("recording started") == 5, prio
    # one.mp4's lines, by their fields: started in segment 0, paused at its end, resumed into 1
    one = [(e.get("REEL_EVENT"), e.get("REEL_SEGMENT"), int(e["PRIORITY"])) for e in mine
           if e.get("REEL_FILE") == "/var/lib/reel/one.mp4"]
    assert one == [("started", "0", 5), ("paused", "0", 5), ("resumed", "1", 5), ("finished", None, 5)], one
    # nothing at error or worse; libdispatch's renice is allowed by the unit (no "Failed to set")
    bad = [(e["PRIORITY"], e["MESSAGE"]) for e in mine if int(e["PRIORITY"]) <= 3 or "Failed to set" in e["MESSAGE"]]
    assert not bad, bad


def decoded_audio(path):
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-vn", "-ac", "1", "-f", "s16le", "-"],
                         stdout=subprocess.PIPE, check=True).stdout
    return np.frombuffer(raw, "<i2").astype(float) / 32768


def test_finished_files_are_found_by_their_journal_fields(finished):
    # the hung recording was not finished but recovered at the next start
    assert set(finished) == {"/var/lib/reel/one.mp4", "/var/lib/reel/two.mp4"}, sorted(finished)
    one, two = finished["/var/lib/reel/one.mp4"], finished["/var/lib/reel/two.mp4"]
    assert (one["REEL_SEGMENTS"], two["REEL_SEGMENTS"]) == ("2", "1"), (one, two)
    assert int(one["REEL_DURATION_NS"]) >= 12_000_000_000 and int(two["REEL_DURATION_NS"]) >= 3_000_000_000, (one, two)
    assert one["PRIORITY"] == "5" and one["REEL_PART"] == "/var/lib/reel/one.mp4.part", one
    assert one["MESSAGE"].startswith("recording finished: /var/lib/reel/one.mp4 (2 segments"), one


@pytest.mark.parametrize("name,at_least", [("one", 12.0), ("two", 3.0)])
def test_files_play_with_picture_and_sound(booted, finished, name, at_least):
    res, _, journal = booted
    # the file as the journal's finished entry names it (collected from the guest into /out)
    entry = finished.get(f"/var/lib/reel/{name}.mp4")
    assert entry, sorted(finished)
    path = res.path(os.path.basename(field(entry, "REEL_FILE")))
    assert os.path.exists(path), os.listdir(res.out)
    codecs = decodes_clean(path)
    assert set(codecs) == {"h264", "aac"}, codecs
    assert min(codecs.values()) >= at_least, codecs
    # The tracks end together, unless the pipeline fell behind the camera under emulation and
    # dropped the last frames (seen: 800 of 1183 dropped on a slow host, the video 1.85 s short):
    # then the video ends with its last kept frame, which players hold. It is never the longer one.
    dropped = int(entry["REEL_DROPPED_FRAMES"])
    assert dropped == int(re.search(r", (\d+) dropped\)", entry["MESSAGE"]).group(1)), entry
    assert codecs["h264"] - codecs["aac"] < 0.5, codecs
    if dropped == 0:
        assert codecs["aac"] - codecs["h264"] < 0.5, (codecs, entry["MESSAGE"])
    # speaker-test's sine on the loopback reached the file: not silence
    x = decoded_audio(path)
    mid = x[len(x) // 4: 3 * len(x) // 4]
    assert np.sqrt(np.mean(mid * mid)) > 0.05, "the recorded audio is (nearly) silent"
