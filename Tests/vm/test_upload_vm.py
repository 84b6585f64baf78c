"""The upload units under a real systemd (issue 26): the guest boots the host's systemd as in
test_systemd_vm.py, in the same boot after it (conftest.py's systemd_boot: scenarios/systemd-unit.sh
with VM_INSIDE_NEXT=upload-inside.sh), installs
Reel as README says, gives remote [reel] `type = local`, and records: reel-upload.path must start
the upload when the finished recording's link appears in the outbox, with reel-upload.timer
stopped so that it cannot be the timer. Then, without /etc/reel/rclone.conf, the unit fails and
its journal names the file and the remote. scripts/vm/guest/upload-inside.sh leaves the facts."""

import json

import pytest



@pytest.fixture(scope="module")
def booted(systemd_boot):
    res = systemd_boot   # the same boot as test_systemd_vm.py's, after it (conftest.py)
    inside = res.text("inside.log") if res.exists("inside.log") else "(no inside.log)"
    assert res.rc == 0, f"{res.tail()}\n---- inside.log ----\n{inside[-4000:]}"
    facts = dict(line.split("=", 1) for line in res.text("upload-facts.txt").splitlines() if "=" in line)
    journal = [json.loads(line) for line in res.text("upload-journal.json").splitlines() if line.strip()]
    return res, facts, journal


def messages(journal, unit="reel-upload.service"):
    return [e.get("MESSAGE", "") for e in journal if e.get("_SYSTEMD_UNIT") == unit or e.get("UNIT") == unit]


def test_the_path_unit_uploads_a_finished_recording(booted):
    _, f, journal = booted
    assert f["verify"].strip() == "", f["verify"]
    assert f["path_state"] == "active", f
    assert f["outbox_mode"] == "2770 reel:reel", f
    assert f["same_sha256"] == "yes" and f["outbox_left"] == "0" and f["recording_kept"] == "yes", f
    assert f["upload_result"] == "success", f
    # the timer was stopped before the recording and did not fire since: the path unit started it
    assert f["timer_last_after"] == f["timer_last_before"], f
    assert float(f["upload_after_s"]) < 120, f
    assert f["timer_state"] == "active", f
    msgs = messages(journal)
    assert any("take.mp4: " in m and ("Copied (new)" in m or "Moved" in m) for m in msgs), msgs[-20:]


def test_reeld_made_the_link(booted):
    _, f, _ = booted
    if f["linked_by"] != "reeld":
        pytest.skip("this reeld has no --outbox-dir yet (issue 26's outbox, branch outbox): the scenario linked the file itself")
    assert f["linked_by_reeld"] == "yes", "reeld had not linked take.mp4 into the outbox 10 s after `stop` answered"


def test_a_missing_rclone_conf_fails_the_unit_with_its_message(booted):
    _, f, journal = booted
    assert f["missing_conf_result"] == "exit-code" and f["missing_conf_status"] == "78", f
    want = "reel-upload: the rclone configuration /etc/reel/rclone.conf does not exist: create it with a remote named [reel]"
    assert any(m.startswith(want) for m in messages(journal)), messages(journal)[-20:]


def test_security_exposure_in_the_guest(booted):
    res, _, _ = booted
    text = res.text("upload-security.txt")
    line = [l for l in text.splitlines() if "Overall exposure level for reel-upload.service" in l]
    assert line and float(line[0].split(":")[1].split()[0]) <= 2.0, text[-2000:]
