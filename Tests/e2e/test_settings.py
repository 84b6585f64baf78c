"""The setting table through the real binary: every setting is a flag of both subcommands
(`--key value` and `--key=value`), `reeld --help` lists each with its default and variable,
`reeld --print-config` is the shipped config/reeld.toml, and flag mistakes are named."""

import os
import re
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def reeld(bindir, *args):
    return subprocess.run([os.path.join(bindir, "reeld"), *args], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, REEL_CONFIG="/dev/null"))


def defaults(bindir):
    """{key: value as --check-config prints it} for the built-in defaults."""
    r = reeld(bindir, "--check-config")
    assert r.returncode == 0, r.stderr
    found = dict(re.findall(r"^(\w+) = (.*)  # default$", r.stdout, re.M))
    assert len(found) >= 23, r.stdout
    return found


def test_print_config_is_the_shipped_file(reel_bin_dir):
    r = reeld(reel_bin_dir, "--print-config")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(REPO, "config", "reeld.toml")) as f:
        assert r.stdout == f.read(), "config/reeld.toml differs from `reeld --print-config` (run `make config/reeld.toml`)"


def test_every_setting_is_a_flag_both_ways(reel_bin_dir):
    keys = defaults(reel_bin_dir)
    args = []
    for i, (key, shown) in enumerate(sorted(keys.items())):
        flag = "--" + key.replace("_", "-")
        value = "" if shown == "[]" else shown.strip('"')
        args += [f"{flag}={value}"] if i % 2 else [flag, value]
    r = reeld(reel_bin_dir, "--check-config", *args)
    assert r.returncode == 0, (args, r.stderr)
    for key in keys:
        flag = "--" + key.replace("_", "-")
        assert re.search(rf"^{key} = .*  # flag {flag}$", r.stdout, re.M), (key, r.stdout)


def test_help_lists_every_setting_with_default_and_variable(reel_bin_dir):
    keys = defaults(reel_bin_dir)
    for argv in (["--help"], ["serve", "--help"], ["record", "--help"]):
        r = reeld(reel_bin_dir, *argv)
        assert r.returncode == 0, r.stderr
        flat = " ".join(r.stdout.split())
        for key, shown in keys.items():
            flag = "--" + key.replace("_", "-")
            default = "none" if shown in ('""', "[]") else shown.strip('"')
            entry = re.search(rf" {re.escape(flag)} (<\w+>|\[<\w+>\]) (.*?) REEL_{key.upper()}, {key}\.", flat)
            assert entry, (argv, key, flat[:3000])
            assert f"Default: {default}." in entry.group(2), (argv, key, entry.group(2))
    crf = " ".join(reeld(reel_bin_dir, "--help").stdout.split())
    assert re.search(r"--crf <n> x264 constant rate factor \(1 to 51,", crf), crf
    assert re.search(r"--standby \[<bool>\] .* --standby alone means true\. Default: false\.", crf), crf


def test_flag_mistakes_are_named(reel_bin_dir):
    r = reeld(reel_bin_dir, "--check-config", "--crff", "20")
    assert r.returncode == 64 and "Unknown option '--crff'. Did you mean '--crf'?" in r.stderr, r.stderr
    r = reeld(reel_bin_dir, "--check-config", "--crf", "x")
    assert r.returncode == 64 and "invalid --crf: 'x' is not an integer" in r.stderr, r.stderr
    r = reeld(reel_bin_dir, "--check-config", "--crf")
    assert r.returncode == 64 and "Missing value for '--crf <value>'" in r.stderr, r.stderr
    r = reeld(reel_bin_dir, "--check-config", "--crf", "99")
    assert r.returncode == 1 and "invalid --crf: 99 is out of range (use 1 to 51" in r.stderr, r.stderr
    r = reeld(reel_bin_dir, "--check-config", "--crf", "20", "--crf", "21")
    assert r.returncode == 0 and re.search(r"^crf = 21  # flag --crf$", r.stdout, re.M), r.stdout
    # reeld record takes the same flags, checked the same way.
    r = reeld(reel_bin_dir, "record", "--output", "/tmp/reel-never.mp4", "--video", "test", "--audio", "test",
              "--duration", "1", "--sample-rate", "7999")
    assert r.returncode == 2 and "invalid --sample-rate: 7999 is out of range (use 8000 to 192000 Hz)" in r.stderr, r.stderr
    assert not os.path.exists("/tmp/reel-never.mp4")


def test_a_boolean_setting_as_a_bare_flag_means_true(reel_bin_dir):
    """`--standby` alone is standby = true (as `--unpaced` is); `--standby=false`, `--standby false`
    and the other words the environment takes still set it, and a word that is none still fails."""
    for args, want in ((["--standby"], "true"), (["--standby", "--crf", "20"], "true"), (["--crf", "20", "--standby"], "true"),
                       (["--standby=false"], "false"), (["--standby", "false"], "false"), (["--standby", "no"], "false"),
                       (["--standby=true", "--standby", "off"], "false"), (["--standby", "false", "--standby"], "true")):
        r = reeld(reel_bin_dir, "--check-config", *args)
        assert r.returncode == 0, (args, r.stderr)
        assert re.search(rf"^standby = {want}  # flag --standby$", r.stdout, re.M), (args, r.stdout)
    r = reeld(reel_bin_dir, "--check-config", "--standby", "maybe")
    assert r.returncode == 64 and "invalid --standby: 'maybe' is not true or false" in r.stderr, r.stderr
    r = reeld(reel_bin_dir, "--check-config", "--standby=")
    assert r.returncode == 64 and "invalid --standby: '' is not true or false" in r.stderr, r.stderr
    # Every other setting still needs its value.
    r = reeld(reel_bin_dir, "--check-config", "--crf", "--standby")
    assert r.returncode == 64 and "Missing value for '--crf <value>'" in r.stderr, r.stderr
