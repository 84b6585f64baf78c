"""The real-driver tier: each test module boots Debian's kernel under QEMU (TCG) once with
scripts/vm/run and checks what the scenario brought back. `make vm` runs it (and `make test`).

REEL_BIN_DIR: reeld and reelctl for the guest (default .build/release); tests that need them
skip when they are missing. REEL_VM=0 skips the whole tier (say why in the commit that sets it)."""

import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
for p in (HERE, os.path.join(REPO, "scripts")):
    if p not in sys.path:
        sys.path.insert(0, p)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("REEL_VM") == "0":
        skip = pytest.mark.skip(reason="REEL_VM=0: the VM tier was switched off")
        for it in items:
            if "Tests/vm" in str(it.fspath):
                it.add_marker(skip)


@pytest.fixture(scope="session")
def vm_ready():
    """scripts/vm/prepare (installs qemu and the tools, fetches the kernel, builds the base
    initramfs; cached). A failure here is a failure, not a skip: the bed must work."""
    import subprocess
    p = subprocess.run([os.path.join(REPO, "scripts", "vm", "prepare")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    assert p.returncode == 0, "scripts/vm/prepare failed:\n" + p.stdout.decode(errors="replace")
    assert shutil.which("qemu-system-x86_64"), "qemu-system-x86_64 missing after prepare"
    return True


@pytest.fixture(scope="session")
def reel_bin_dir():
    d = os.environ.get("REEL_BIN_DIR") or os.path.join(REPO, ".build", "release")
    missing = [b for b in ("reeld", "reelctl") if not os.access(os.path.join(d, b), os.X_OK)]
    if missing:
        pytest.skip(f"{d} lacks {', '.join(missing)}: run `make build` or set REEL_BIN_DIR")
    return d


@pytest.fixture(scope="session")
def systemd_boot(vm_ready, reel_bin_dir):
    """One boot of the host's systemd in the guest (scenarios/systemd-unit.sh, --host-root) for
    two test modules: systemd-inside.sh (reeld's unit: test_systemd_vm.py), then in the same boot
    upload-inside.sh (the upload units: test_upload_vm.py). Each module checks its own facts
    file; a boot costs minutes under TCG."""
    from vmbed import run_scenario
    return run_scenario("systemd-unit", bin_dir=reel_bin_dir, env={"VM_INSIDE_NEXT": "upload-inside.sh"},
                        timeout=900, extra=("--host-root",))
