"""The systemd units: `systemd-analyze verify` is clean and `systemd-analyze security` rates
reeld.service's exposure at 1.5 or less. ExecStart= is pointed at the built reeld so verify
can check it is executable, as it would be after `make install`."""

import os
import re
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UNITS = os.path.join(REPO, "systemd")


@pytest.fixture
def units(reel_bin_dir, tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.fail("systemd-analyze not found: run 'make deps' (installs Debian's systemd)")
    for name in ("reeld.service", "reeld.socket"):
        text = open(os.path.join(UNITS, name)).read()
        text = text.replace("/usr/local/bin/reeld", os.path.join(os.path.abspath(reel_bin_dir), "reeld"))
        (tmp_path / name).write_text(text)
    return tmp_path


def test_verify_is_clean(units):
    p = subprocess.run(["systemd-analyze", "verify", str(units / "reeld.service"), str(units / "reeld.socket")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), p.stdout + p.stderr


def test_security_exposure_at_most_1_5(units, note):
    p = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(units / "reeld.service")],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for reeld\.service: (\d+\.\d+)", p.stdout)
    assert m, p.stdout + p.stderr
    note(f"systemd-analyze security exposure {m.group(1)}")
    assert float(m.group(1)) <= 1.5, p.stdout


def test_sysusers_and_tmpfiles_parse(tmp_path):
    for tool, f in (("systemd-sysusers", "reel.sysusers"), ("systemd-tmpfiles", "reel.tmpfiles")):
        if not shutil.which(tool):
            pytest.fail(f"{tool} not found: run 'make deps'")
    # --dry-run style checks against an empty root: the files must parse without errors.
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    for f in ("passwd", "group", "shadow", "gshadow"):
        (root / "etc" / f).write_text("video:x:44:\naudio:x:29:\n" if f == "group" else "")
    p = subprocess.run(["systemd-sysusers", f"--root={root}", os.path.join(UNITS, "reel.sysusers")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    group = (root / "etc" / "group").read_text()
    assert re.search(r"^video:x:44:reel$", group, re.M) and re.search(r"^audio:x:29:reel$", group, re.M), group
    assert re.search(r"^reel:x:\d+:", (root / "etc" / "passwd").read_text(), re.M)
    p = subprocess.run(["systemd-tmpfiles", f"--root={root}", "--create", os.path.join(UNITS, "reel.tmpfiles")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (root / "run" / "reel").is_dir() and (root / "var" / "lib" / "reel").is_dir()
