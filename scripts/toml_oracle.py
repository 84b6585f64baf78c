#!/usr/bin/python3
"""Compares reeld's TOML reader (TOMLDocument) with Python's tomllib on files of TOML text.

    scripts/toml_oracle.py FUZZ_CONFIG DIR_OR_FILE...

FUZZ_CONFIG is the normal (not libFuzzer) build of fuzz-config, e.g. .build/debug/fuzz-config;
`make fuzz` runs this over the corpus the config fuzzer grew (.build/fuzz/corpus/config) and
Tests/fuzz/config. For each file both readers must agree on whether it is TOML and, if it is, on
the root keys, their types, and the strings and integers reeld reads.

One leniency is allowed on purpose: inside tables TOMLDocument checks the syntax only (no
duplicate keys, table redefinitions), and it takes the leap second 60; a file only that
leniency accepts holds a table or a date, which reeld refuses anyway, so it is counted, not
failed; so is an integer beyond 64 bits, which tomllib reads and TOML makes an error. Where
both refuse a file, how often they blame the same line is counted (ORACLE_FLAGS=-v lists the
others). Exit status 1 on any other disagreement.
"""
import datetime
import json
import os
import re
import subprocess
import sys
import tomllib

READS = {"string", "int"}  # and arrays of strings


def type_name(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "string"
    if isinstance(v, datetime.datetime):
        return "dateTime"
    if isinstance(v, datetime.date):
        return "date"
    if isinstance(v, datetime.time):
        return "time"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "table"
    raise TypeError(type(v))


def refused_by_reeld(node):
    """A value no reeld key takes: anything but a string, an integer or an array of strings."""
    if node["type"] in READS:
        return False
    if node["type"] == "array":
        return any(item["type"] != "string" for item in node["array"])
    return True


def same(node, value, where):
    """Differences between TOMLDocument's node and tomllib's value."""
    t = type_name(value)
    if node["type"] != t:
        return [f"{where}: type {node['type']} vs tomllib {t}"]
    if t == "string" and node["string"] != value:
        return [f"{where}: string {node['string']!r} vs tomllib {value!r}"]
    if t == "int" and node["int"] != value:
        return [f"{where}: int {node['int']} vs tomllib {value}"]
    if t == "array":
        if len(node["array"]) != len(value):
            return [f"{where}: {len(node['array'])} elements vs tomllib {len(value)}"]
        out = []
        for k, (n, v) in enumerate(zip(node["array"], value)):
            out += same(n, v, f"{where}[{k}]")
        return out
    return []


def beyond_64_bits(v):
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return not -2**63 <= v < 2**63
    if isinstance(v, list):
        return any(beyond_64_bits(x) for x in v)
    if isinstance(v, dict):
        return any(beyond_64_bits(x) for x in v.values())
    return False


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, paths = sys.argv[1], sys.argv[2:]
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if not f.startswith("."))
        else:
            files.append(p)
    dumps = []
    for start in range(0, len(files), 500):
        chunk = files[start:start + 500]
        out = subprocess.run([binary, "--toml-json", *chunk], capture_output=True, text=True, check=True).stdout
        dumps += [json.loads(line) for line in out.splitlines()]
    assert len(dumps) == len(files), (len(dumps), len(files))

    counts = {"both read": 0, "both refuse": 0, "both refuse, same line": 0, "lenient (refused by reeld anyway)": 0,
              "integer beyond 64 bits (tomllib lenient)": 0, "not UTF-8": 0, "BOM": 0}
    other_lines = []
    problems = []
    for f, d in zip(files, dumps):
        if not d["utf8"]:
            counts["not UTF-8"] += 1
            continue
        raw = open(f, "rb").read()
        text = raw.decode("utf-8")
        if text.startswith("\ufeff"):  # TOMLDocument skips a BOM, tomllib does not
            counts["BOM"] += 1
            text = text[1:]
        try:
            expected = tomllib.loads(text)
            error = None
        except tomllib.TOMLDecodeError as e:
            expected, error = None, str(e)
        except RecursionError:
            expected, error = None, "nested too deeply for tomllib"
        if d["ok"] and expected is not None:
            counts["both read"] += 1
            if sorted(d["keys"]) != sorted(expected):
                problems.append(f"{f}: keys {sorted(d['keys'])} vs tomllib {sorted(expected)}")
                continue
            for k, v in expected.items():
                problems += [f"{f}: {p}" for p in same(d["keys"][k], v, k)]
        elif not d["ok"] and expected is None:
            counts["both refuse"] += 1
            m = re.search(r"at line (\d+)", error)
            if m and int(m.group(1)) == d["line"]:
                counts["both refuse, same line"] += 1
            else:
                other_lines.append(f"{f}: line {d['line']} ({d['error']}) vs tomllib: {error}")
        elif d["ok"]:
            if any(refused_by_reeld(n) for n in d["keys"].values()):
                counts["lenient (refused by reeld anyway)"] += 1
            else:
                problems.append(f"{f}: TOMLDocument reads it, tomllib refuses: {error}")
        elif beyond_64_bits(expected):  # TOML: "an error must be thrown"
            counts["integer beyond 64 bits (tomllib lenient)"] += 1
        else:
            problems.append(f"{f}: TOMLDocument refuses it (line {d['line']}: {d['error']}), tomllib reads {expected!r:.200}")
    if "-v" in os.environ.get("ORACLE_FLAGS", ""):
        for o in other_lines[:40]:
            print("line differs:", o)
    for p in problems[:50]:
        print(p)
    print(f"{len(files)} files: " + ", ".join(f"{v} {k}" for k, v in counts.items()) + f"; {len(problems)} disagreements")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
