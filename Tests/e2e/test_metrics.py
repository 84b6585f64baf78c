"""metrics_file: reeld rewrites a Prometheus text file once a second for node_exporter's textfile
collector. Read here with prometheus_client's own parser (Debian's python3-prometheus-client,
installed by `make deps`) while recording: every metric parses, the numbers move with the
recording, the file is replaced atomically and removed when reeld stops."""

import os
import time

import pytest

parser = pytest.importorskip("prometheus_client.parser",
                             reason="needs prometheus_client (Debian: python3-prometheus-client; `make deps` installs it)")


def scrape(path):
    """{sample name: {labels as a sorted tuple: value}} from the file, with prometheus_client's parser."""
    with open(path) as f:
        text = f.read()
    samples = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def one(samples, name, **labels):
    return samples[name][tuple(sorted(labels.items()))]


def wait_for(path, pred, timeout=15):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if os.path.exists(path):
            last = scrape(path)
            if pred(last):
                return last
        time.sleep(0.2)
    raise AssertionError(f"metrics never satisfied the condition within {timeout} s; last: {last}")


def test_metrics_file_while_recording(reeld, tmp_path):
    path = str(tmp_path / "reel.prom")
    r = reeld("metrics", **{"metrics-file": path})
    # Written before READY=1: idle, nothing recorded, every error kind at 0, the build named.
    idle = scrape(path)
    assert one(idle, "reel_state", state="idle") == 1 and one(idle, "reel_state", state="recording") == 0
    assert one(idle, "reel_recorded_seconds") == 0
    kinds = {dict(k)["kind"] for k in idle["reel_errors_total"]}
    assert {"start", "source", "storage", "low_space", "recording", "stall", "reload", "metrics"} <= kinds, kinds
    assert all(v == 0 for v in idle["reel_errors_total"].values()), idle["reel_errors_total"]
    assert list(idle["reel_build_info"].values()) == [1.0]
    assert one(idle, "reel_free_bytes") > 0

    r.ctl("start", "--name", "watched")
    rec = wait_for(path, lambda m: one(m, "reel_state", state="recording") == 1 and one(m, "reel_recorded_seconds") >= 2)
    assert one(rec, "reel_frames") >= 30, rec
    assert one(rec, "reel_bytes_written") > 10_000, rec
    assert one(rec, "reel_dropped_frames") >= 0 and one(rec, "reel_audio_filled_samples") >= 0
    # fsync = "fragment" (the default): the last fragment's sync took a measurable, sane time.
    assert 0 < one(rec, "reel_fragment_sync_seconds") < 5, rec
    # Once a second: a later scrape shows more recorded.
    later = wait_for(path, lambda m: one(m, "reel_recorded_seconds") >= one(rec, "reel_recorded_seconds") + 1)
    assert one(later, "reel_frames") > one(rec, "reel_frames")
    # Replaced by rename: the collector's *.prom glob never sees the temporary file for long.
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".prom") and n != "reel.prom"]

    r.ctl("pause")
    wait_for(path, lambda m: one(m, "reel_state", state="paused") == 1)
    r.ctl("resume")
    r.ctl("stop")
    wait_for(path, lambda m: one(m, "reel_state", state="idle") == 1)
    assert r.terminate() == 0
    assert not os.path.exists(path), "reeld left its metrics file behind after stopping"
    assert not os.path.exists(path + ".tmp")


def test_metrics_count_errors_by_kind(reeld, tmp_path):
    path = str(tmp_path / "reel.prom")
    # 10 TB free needed: start is refused, and counted as a start error.
    r = reeld("metrics-errors", **{"metrics-file": path, "min-free-mb": "10000000"})
    c = r.ctl("start", "--name", "refused", expect_ok=False)
    assert c.rc == 1 and "below min_free_mb" in c.err, c
    m = wait_for(path, lambda m: one(m, "reel_errors_total", kind="start") == 1)
    assert one(m, "reel_errors_total", kind="storage") == 0


def test_an_unwritable_metrics_file_is_logged_not_fatal(reeld, tmp_path):
    path = str(tmp_path / "missing-dir" / "reel.prom")
    r = reeld("metrics-unwritable", **{"metrics-file": path})
    r.ctl("start", "--name", "still-records")
    time.sleep(1.5)
    r.ctl("stop")
    log = open(r.log_path, errors="replace").read()
    assert log.count(f"metrics_file: cannot create {path}.tmp") == 1, log
