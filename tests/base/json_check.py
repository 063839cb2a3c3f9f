# SPDX-License-Identifier: Apache-2.0
"""Checks that what recap writes as JSON is valid UTF-8 JSON (RFC 8259), with a strict parser:
the bytes decode as UTF-8 with errors="strict", json.loads (strict: no raw control characters in
strings) parses them, and every string holds the bytes it was given, invalid UTF-8 replaced by
U+FFFD per maximal invalid subpart (Python's errors="replace"). For tests/base/test_json.c:

  json_check.py quote CLIENT SEED        recap's JSON strings of random bytes (json_client quote)
  json_check.py array CLIENT SEED        random lists of names as JSON arrays in every size up to
                                         what each needs (json_client array): whole names in
                                         their order, listed + left out = all, within the size
  json_check.py report CLIENT SEED       the RECAP_REPORT line of a process whose framework
                                         generators have random byte names
  json_check.py probe PROBE SEED         recap-probe --json with RECAP_* values of random bytes
  json_check.py run PROBE CLIENT SEED    recap-probe --json --run of a process with such names
"""
import json
import os
import random
import subprocess
import sys
import tempfile

REPORT_KEYS = ["schema", "recap", "time", "host", "pid", "rank", "hooks", "captures",
               "graphs_with_rng", "launches", "slot_writes", "states_primed", "live_records",
               "framework_generators", "frameworks", "frameworks_left_out", "subscriptions",
               "settings_flagged", "settings_flagged_left_out"]
PIECES = [b"\n", b"\r", b"\t", b'"', b"\\", b"\x01", b"\x1f", b"\x7f", b"\xc3\xa9",
          b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80",
          b"\xc0\xaf", b"\xff", b",", b"a", b"\xef\xbf\xbd"]


def fail(msg):
    sys.exit("json_check: " + msg)


def strict(data, what):
    """data (bytes) decoded strictly, each line parsed strictly: the parsed lines."""
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        fail(f"{what}: not UTF-8: {e}: {data!r}")
    out = []
    for line in text.split("\n"):  # (not splitlines: U+0085 and U+2028 stand raw in JSON)
        if line == "":
            continue
        try:
            out.append(json.loads(line, strict=True))
        except ValueError as e:
            fail(f"{what}: not JSON: {e}: {line!r}")
    return out


def random_bytes(r, nul=False):
    b, want = b"", r.randrange(1, 24)
    while len(b) < want:
        if r.randrange(3) == 0:
            b += bytes([r.randrange(0 if nul else 1, 256)])
        else:
            b += r.choice(PIECES)
    return b


def names_of(r):
    names = [random_bytes(r) for _ in range(r.randrange(1, 8))]
    if r.randrange(2):
        names.append(r.choice(names))  # the same name twice: listed once
    return names


def expected_names(names):
    """What recap lists: names cut to 63 bytes, each once, those that fit 160 bytes in all."""
    seen, used = [], 0
    for n in names:
        n = n[:63]
        if n in seen or used + len(n) + 1 > 160:
            continue
        seen.append(n)
        used += len(n) + 1
    return [n.decode("utf-8", errors="replace") for n in seen]


def quote(client, seed):
    out = subprocess.run([client, "quote", str(seed), "3000"], check=True,
                         stdout=subprocess.PIPE).stdout
    for line in out.split(b"\n")[:-1]:
        hexed, lit = line.split(b"\t")
        want = bytes.fromhex(hexed.decode()).decode("utf-8", errors="replace")
        got = strict(lit, "quoted string")[0]
        if got != want:
            fail(f"{lit!r} parses to {got!r}, not {want!r}")


def array(client, seed):
    p = subprocess.run([client, "array", str(seed), "60"], capture_output=True)
    if p.returncode != 0:
        fail(f"json_client array: exit {p.returncode}: {p.stderr!r}")
    out = p.stdout
    lines = [line.split(b"\t") for line in out.split(b"\n")[:-1]]
    for i, (cap, hexed, left_out, lit) in enumerate(lines):
        last = i + 1 == len(lines) or lines[i + 1][1] != hexed  # the list's largest size
        cap, left_out = int(cap), int(left_out)
        names = [bytes.fromhex(h.decode()).decode("utf-8", errors="replace")
                 for h in hexed.split(b",")]
        if cap < 3:
            if lit != b"" or left_out != len(names):
                fail(f"size {cap}: {lit!r}, {left_out} left out of {len(names)}")
            continue
        if len(lit) + 1 > cap:
            fail(f"size {cap}: an array of {len(lit)} bytes and its NUL: {lit!r}")
        got = strict(lit, "array")[0]
        if not isinstance(got, list) or len(got) + left_out != len(names):
            fail(f"size {cap}: {got!r} and {left_out} left out for {len(names)} names")
        rest = iter(names)  # whole names, in their order
        if not all(any(g == n for n in rest) for g in got):
            fail(f"size {cap}: {got!r} is not whole names of {names!r} in order")
        if last and left_out != 0:
            fail(f"size {cap}: {left_out} left out with room for all")


def check_report(line, names):
    if list(line) != REPORT_KEYS:
        fail(f"report keys {list(line)}")
    if type(line["schema"]) is not int or line["schema"] != 2:
        fail(f"schema {line['schema']!r}")
    if not isinstance(line["settings_flagged"], list):
        fail(f"settings_flagged {line['settings_flagged']!r} is not an array")
    if line["frameworks"] != expected_names(names):
        fail(f"frameworks {line['frameworks']!r}, not {expected_names(names)!r}")
    if line["framework_generators"] != len(names):
        fail(f"framework_generators {line['framework_generators']}")


def report(client, seed):
    r = random.Random(seed)
    names = names_of(r)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "report.jsonl")
        env = dict(os.environb)
        env[b"RECAP_REPORT"] = path.encode()
        subprocess.run([client, "names"] + [n.hex() for n in names], check=True, env=env)
        with open(path, "rb") as f:
            lines = strict(f.read(), "report")
    if len(lines) != 1:
        fail(f"{len(lines)} report lines")
    check_report(lines[0], names)


def probe(tool, seed):
    r = random.Random(seed)
    env = {k: v for k, v in os.environb.items() if not k.startswith(b"RECAP_")}
    values = {}
    for i in range(r.randrange(1, 6)):
        key = b"RECAP_JSONTEST_%d" % i
        values[key.decode()] = random_bytes(r)
        env[key] = values[key.decode()]
    out = subprocess.run([tool, "--json", "--check", "philox"], env=env,
                         stdout=subprocess.PIPE).stdout
    doc = strict(out, "recap-probe --json")
    if len(doc) != 1:
        fail(f"{len(doc)} documents")
    settings = doc[0]["settings"]
    for k, v in values.items():
        if settings.get(k) != v.decode("utf-8", errors="replace"):
            fail(f"setting {k}: {settings.get(k)!r}, not {v!r}")


def run(tool, client, seed):
    r = random.Random(seed)
    names = names_of(r)
    env = {k: v for k, v in os.environb.items() if not k.startswith(b"RECAP_")}
    env[b"RECAP_JSONTEST"] = random_bytes(r)
    out = subprocess.run([tool, "--json", "--run", "--", client, "names"] +
                         [n.hex() for n in names], env=env, stdout=subprocess.PIPE).stdout
    doc = strict(out.split(b"\n")[-2] if out.endswith(b"\n") else out, "recap-probe --run")[0]
    rep = doc["report"]
    if rep["processes"] != 1 or rep["frameworks"] != expected_names(names):
        fail(f"report {rep!r}, frameworks not {expected_names(names)!r}")
    if rep["schema"] != 2:
        fail(f"schema {rep['schema']!r}")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "quote":
        quote(args[0], int(args[1]))
    elif cmd == "array":
        array(args[0], int(args[1]))
    elif cmd == "report":
        report(args[0], int(args[1]))
    elif cmd == "probe":
        probe(args[0], int(args[1]))
    elif cmd == "run":
        run(args[0], args[1], int(args[2]))
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main()
