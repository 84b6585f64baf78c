"""No write through a planted link, no overwrite (issue 22, item 3): every file reeld or reelctl
creates is created without following a symbolic link at its last component and without
replacing a file already there, whoever planted it and whenever."""

import os
import time
from reel_harness import recording_for  # scripts/, on sys.path through conftest.py


def victim(path, text=b"a recording nobody may overwrite\n"):
    with open(path, "wb") as f:
        f.write(text)
    return text


def test_a_planted_metrics_tmp_link_does_not_truncate_a_recording(reeld, tmp_path):
    """A member of the control group who may write to the metrics directory plants
    reel.prom.tmp -> a recording: reeld must refuse to write through it (today it truncated the
    recording and wrote the metrics into it within a second)."""
    metrics = str(tmp_path / "reel.prom")
    rec = str(tmp_path / "lecture.mp4")
    before = victim(rec)
    os.symlink(rec, metrics + ".tmp")
    # The metrics file is written once before READY=1, and once a second after.
    r = reeld("planted-metrics", **{"metrics-file": metrics})
    assert open(rec, "rb").read() == before, "reeld wrote the metrics through the planted link"
    assert os.path.islink(metrics + ".tmp")
    log = open(r.log_path, errors="replace").read()
    assert f"refusing to write {metrics}.tmp: it exists and is a symbolic link" in log, log
    assert not os.path.exists(metrics)
    # Once the link is gone, the metrics are written again (within a second: polled, as a
    # collector would).
    os.unlink(metrics + ".tmp")
    deadline = time.monotonic() + 10
    while not os.path.exists(metrics) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert os.path.isfile(metrics) and not os.path.islink(metrics), os.listdir(tmp_path)
    assert r.terminate() == 0
    assert open(rec, "rb").read() == before


def test_a_planted_part_link_is_not_followed(reeld):
    """NAME.mp4.part planted as a dangling link: `start` must not create the file it points to
    (O_CREAT through the link) and must say why."""
    r = reeld("planted-part")
    target = os.path.join(r.dir, "created-through-the-link")
    os.symlink(target, os.path.join(r.out_dir, "x.mp4.part"))
    c = r.ctl("start", "--name", "x", expect_ok=False)
    assert c.rc != 0, c
    assert not os.path.exists(target), "reeld created a file through the planted link"
    assert "x.mp4.part" in c.err and "symbolic link" in c.err, c


def test_a_file_planted_at_the_final_name_is_not_replaced(reeld):
    """Between `start` and `stop` something takes NAME.mp4: the recording must not replace it
    (today the final rename did); it is kept under the next free name, which stop prints."""
    r = reeld("planted-final")
    r.ctl("start", "--name", "y")
    assert r.wait_notify_after(0, recording_for(1), 10)
    final = os.path.join(r.out_dir, "y.mp4")
    before = victim(final)
    got = r.ctl("stop").out.strip()
    assert open(final, "rb").read() == before, "the recording replaced a file at its final name"
    assert got == os.path.join(r.out_dir, "y-2.mp4"), got
    assert os.path.getsize(got) > 10_000
    assert r.status()["lastFile"] == got


def test_a_snapshot_is_not_written_through_a_link_or_over_a_file(reeld):
    r = reeld("planted-snapshot")
    rec = os.path.join(r.out_dir, "lecture.mp4")
    before = victim(rec)
    link = os.path.join(r.dir, "snap.jpg")
    os.symlink(rec, link)
    c = r.ctl("snapshot", "-o", link, expect_ok=False)
    assert c.rc != 0 and f"refusing to write {link}: it exists and is a symbolic link" in c.err, c
    assert open(rec, "rb").read() == before, "reelctl wrote the snapshot through the link"
    c = r.ctl("snapshot", "-o", rec, expect_ok=False)
    assert c.rc != 0 and f"refusing to write {rec}: it exists" in c.err, c
    assert open(rec, "rb").read() == before, "reelctl replaced an existing file with the snapshot"
