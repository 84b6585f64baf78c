"""`make install` into a temporary DESTDIR: the tree has the binaries, units rewritten for
PREFIX, sysusers and tmpfiles entries, the config, and reelctl's shell completions; the
installed config passes `reeld --check-config` and the installed units verify."""

import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_install(reel_bin_dir, dest, prefix):
    p = subprocess.run(["make", "-s", "-C", REPO, "install-files", f"DESTDIR={dest}", f"PREFIX={prefix}",
                        f"BIN_SRC={os.path.abspath(reel_bin_dir)}"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def test_install_tree(reel_bin_dir, tmp_path):
    dest = tmp_path / "dest"
    make_install(reel_bin_dir, dest, "/opt/reel")
    want = {
        "opt/reel/bin/reeld": 0o755, "opt/reel/bin/reelctl": 0o755, "opt/reel/bin/reel-web": 0o755,
        "opt/reel/bin/reel-verify": 0o755,
        "opt/reel/lib/systemd/system/reeld.service": 0o644, "opt/reel/lib/systemd/system/reeld.socket": 0o644,
        "opt/reel/lib/systemd/system/reel-web.service": 0o644,
        "opt/reel/lib/systemd/system/reel-upload.service": 0o644, "opt/reel/lib/systemd/system/reel-upload.path": 0o644,
        "opt/reel/lib/systemd/system/reel-upload.timer": 0o644, "opt/reel/lib/reel/reel-upload": 0o755,
        "etc/reel/upload.env": 0o644,
        "opt/reel/share/reel/web/index.html": 0o644, "opt/reel/share/reel/web/signin.html": 0o644,
        "opt/reel/lib/sysusers.d/reel.conf": 0o644, "opt/reel/lib/tmpfiles.d/reel.conf": 0o644,
        "etc/reel/reeld.toml": 0o644,
        "opt/reel/share/bash-completion/completions/reelctl": None,
        "opt/reel/share/zsh/site-functions/_reelctl": None,
        "opt/reel/share/fish/vendor_completions.d/reelctl.fish": None,
    }
    for rel, mode in want.items():
        f = dest / rel
        assert f.is_file() and f.stat().st_size > 0, f"{rel} missing or empty"
        if mode is not None:
            assert f.stat().st_mode & 0o777 == mode, f"{rel} has mode {oct(f.stat().st_mode & 0o777)}"
    unit = (dest / "opt/reel/lib/systemd/system/reeld.service").read_text()
    assert "ExecStart=/opt/reel/bin/reeld --config /etc/reel/reeld.toml" in unit
    web_unit = (dest / "opt/reel/lib/systemd/system/reel-web.service").read_text()
    assert "ExecStart=/opt/reel/bin/reel-web --listen 127.0.0.1:8080" in web_unit
    assert "LoadCredential=password:/etc/reel/web-password" in web_unit
    upload_unit = (dest / "opt/reel/lib/systemd/system/reel-upload.service").read_text()
    assert "ExecStart=/opt/reel/lib/reel/reel-upload\n" in upload_unit
    assert "EnvironmentFile=-/etc/reel/upload.env" in upload_unit
    assert "conf=${REEL_UPLOAD_CONFIG:-/etc/reel/rclone.conf}" in (dest / "opt/reel/lib/reel/reel-upload").read_text()
    assert "_reelctl" in (dest / "opt/reel/share/bash-completion/completions/reelctl").read_text()
    # reelctl verify runs the installed reel-verify (its options, --help included, and its errors),
    # and reelctl itself loads no FFmpeg: every script's and button's call starts it.
    ctl = str(dest / "opt/reel/bin/reelctl")
    h = subprocess.run([ctl, "verify", "--help"], capture_output=True, text=True, timeout=30)
    assert h.returncode == 0 and "--schedule-tolerance-ms" in h.stdout and "reel-verify" in h.stdout, (h.stdout, h.stderr)
    e = subprocess.run([ctl, "verify", str(tmp_path / "absent.mp4")], capture_output=True, text=True, timeout=30)
    assert e.returncode == 2 and e.stderr.startswith("reel-verify: ") and "absent.mp4" in e.stderr, (e.returncode, e.stderr)
    libs = subprocess.run(["ldd", ctl], capture_output=True, text=True, timeout=30).stdout
    assert not any(n in libs for n in ("libavcodec", "libavformat", "libx264")), libs
    check = subprocess.run([str(dest / "opt/reel/bin/reeld"), "--check-config", "--config", str(dest / "etc/reel/reeld.toml")],
                           capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr
    # The units as installed verify (ExecStart points into DESTDIR for the check only).
    names = ("reeld.service", "reeld.socket", "reel-web.service", "reel-upload.service", "reel-upload.path", "reel-upload.timer")
    for name in names:
        p = dest / "opt/reel/lib/systemd/system" / name
        (tmp_path / name).write_text(p.read_text().replace("/opt/reel/bin/", str(dest / "opt/reel/bin") + "/")
                                     .replace("/opt/reel/lib/reel/", str(dest / "opt/reel/lib/reel") + "/"))
    v = subprocess.run(["systemd-analyze", "verify", *(str(tmp_path / n) for n in names)],
                       capture_output=True, text=True, timeout=60)
    assert v.returncode == 0 and not (v.stdout + v.stderr).strip(), v.stdout + v.stderr


def test_installed_reel_web_serves_the_installed_page(reel_bin_dir, tmp_path):
    """reel-web finds its page in PREFIX/share/reel/web, beside its bin/."""
    import urllib.request
    dest = tmp_path / "dest"
    make_install(reel_bin_dir, dest, "/opt/reel")
    web = subprocess.Popen([str(dest / "opt/reel/bin/reel-web"), "--no-auth", "--listen", "127.0.0.1:0",
                            "--socket", str(tmp_path / "none.sock"), "--recordings", str(tmp_path)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port, seen = None, []
        for line in web.stderr:
            seen.append(line)
            if "reel-web listening on 127.0.0.1:" in line:
                port = int(line.rsplit(":", 1)[1])
                break
        assert port, "".join(seen)
        assert any("--no-auth" in l for l in seen), "".join(seen)  # the warning
        assert any(str(dest / "opt/reel/share/reel/web") in l for l in seen), "".join(seen)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            assert r.status == 200
            assert r.read() == (dest / "opt/reel/share/reel/web/index.html").read_bytes()
    finally:
        web.terminate()
        assert web.wait(timeout=10) == 0


def test_install_keeps_an_edited_config(reel_bin_dir, tmp_path):
    dest = tmp_path / "dest"
    make_install(reel_bin_dir, dest, "/usr/local")
    conf = dest / "etc/reel/reeld.toml"
    conf.write_text('crf = 20\n')
    p = make_install(reel_bin_dir, dest, "/usr/local")
    assert conf.read_text() == 'crf = 20\n'
    assert (dest / "etc/reel/reeld.toml.new").is_file()
    assert "kept" in p.stdout
