"""The systemd units: `systemd-analyze verify` is clean, `systemd-analyze security` rates
reeld.service's exposure at 1.0 or less, and a `MemoryMax=` bounds reeld (issue 22). ExecStart=
is pointed at the built reeld so verify can check it is executable, as it would be after
`make install`."""

import os
import re
import shutil
import subprocess

import pytest

from reel_harness import unit_exposure

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


def test_security_exposure_at_most_1_0(units, note):
    exposure, text = unit_exposure(units / "reeld.service")
    assert exposure is not None, text
    note(f"systemd-analyze security exposure {exposure}")
    assert exposure <= 1.0, text


def unit_bytes(value):
    """A systemd size (`768M`, `1G`, `512K`, bytes) in bytes."""
    m = re.fullmatch(r"(\d+)([KMGT]?)", value.strip())
    assert m, f"not a plain size: {value!r}"
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " ")


def test_memory_is_bounded(units, note):
    """MemoryMax= bounds reeld above its measured peak: 310 MiB at 1080p (docs/PERFORMANCE.md) plus
    256 control clients each holding 64 KiB and a 1080p snapshot reply (~270 MiB); MemoryHigh=,
    where the kernel starts to reclaim, sits between the peak and MemoryMax=."""
    text = (units / "reeld.service").read_text()
    values = dict(re.findall(r"^(MemoryMax|MemoryHigh)=(.+)$", text, re.M))
    assert "MemoryMax" in values, "reeld.service sets no MemoryMax="
    peak = 310 << 20
    high, cap = unit_bytes(values["MemoryHigh"]), unit_bytes(values["MemoryMax"])
    note(f"MemoryHigh={values['MemoryHigh']} MemoryMax={values['MemoryMax']}")
    assert peak + (256 * ((64 << 10) + 800_000)) <= cap, f"MemoryMax={values['MemoryMax']} leaves no room above the peak"
    assert peak < high < cap, (values, "MemoryHigh= must sit between the 1080p peak and MemoryMax=")
    assert cap <= 1 << 30, f"MemoryMax={values['MemoryMax']} is no real bound on a capture box"


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


def test_button_unit_verifies_for_an_instance(reel_bin_dir, tmp_path):
    """reel-button@.service, instantiated for a device name as README says, verifies clean with
    ExecStart= at the built reel-button (a unit that cannot start would show here)."""
    text = open(os.path.join(UNITS, "reel-button@.service")).read()
    assert "--device /dev/input/by-id/%i" in text and "RestartPreventExitStatus=2" in text
    text = text.replace("/usr/local/bin/reel-button", os.path.join(os.path.abspath(reel_bin_dir), "reel-button"))
    (tmp_path / "reel-button@.service").write_text(text)
    instance = tmp_path / "reel-button@usb-Pedal-event-kbd.service"
    instance.symlink_to(tmp_path / "reel-button@.service")
    p = subprocess.run(["systemd-analyze", "verify", str(instance)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), p.stdout + p.stderr
