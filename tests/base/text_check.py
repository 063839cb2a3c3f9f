# SPDX-License-Identifier: Apache-2.0
"""Checks what recap writes for people to read, fed random hostile bytes (tests/base/log_lines.sh):

  text_check.py log CLIENT SEED      values of settings (RECAP_LOG_TIME, RECAP_LOG_FILE), a host's
                                     message and framework and state names (tests/log_line_client):
                                     every stderr line is one of recap's (its prefix), valid UTF-8
                                     with no control character, one line per message
  text_check.py flagged CLIENT SEED  N unknown RECAP_* variables of random lengths (0..40 of
                                     any, then sets that fill the list to near its end):
                                     the RECAP_REPORT line's settings_flagged holds whole names of
                                     the environment only, and listed + settings_flagged_left_out
                                     == N

The seed is printed on failure; RECAP_TEST_SEED=N reruns one.
"""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

PREFIX = re.compile(rb"^[^ ]+:\d+:\d+ (\[\d+\] )?recap (WARN|INFO|DEBUG) ")
PIECES = [b"\n", b"\r", b"\t", b"\x1b[31m", b"\x1b", b"\x7f", b"\xc2\x85", b"\xe2\x80\xa8",
          b"\xe2\x80\xa9", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xff",
          b"\xc3\xa9", b"\xf0\x9f\x98\x80", b"%s", b"%n", b"\\", b"h:1:1 recap INFO forged"]
CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def fail(seed, msg):
    sys.exit(f"text_check: seed {seed}: {msg}")


def hostile(rng, longest=4096):
    """Random bytes (1..longest), cut at a NUL as argv and environ cut them; never empty."""
    want, out = rng.randint(1, longest), bytearray()
    while len(out) < want:
        out += bytes([rng.randrange(256)]) if rng.random() < 0.3 else rng.choice(PIECES)
    out = bytes(out[:want]).split(b"\0")[0]
    return out or b"x"


def check_lines(seed, err, expected, what):
    lines = err.split(b"\n")
    if lines[-1] != b"":
        fail(seed, f"{what}: the output does not end a line: {err[-200:]!r}")
    lines = lines[:-1]
    for line in lines:
        if not PREFIX.match(line):
            fail(seed, f"{what}: a line without recap's prefix: {line[:300]!r}")
        try:
            text = line.decode("utf-8", errors="strict")
        except UnicodeDecodeError as e:
            fail(seed, f"{what}: not UTF-8 ({e}): {line[:300]!r}")
        if CONTROLS.search(text):
            fail(seed, f"{what}: a raw control character: {line[:300]!r}")
    if len(lines) != expected:
        fail(seed, f"{what}: {len(lines)} lines for {expected} messages: {err[:2000]!r}")


def base_env():
    env = {k: v for k, v in os.environb.items() if not k.startswith(b"RECAP_")}
    return env


def log(client, seed):
    rng = random.Random(seed)
    for _ in range(12):
        env = base_env()
        env[b"RECAP_LOG"] = b"warn"
        env[b"RECAP_LOG_TIME"] = b"x" + hostile(rng)  # not 0 or 1: one warning
        env[b"RECAP_LOG_FILE"] = b"/nonexistent-recap-dir/" + hostile(rng)  # one warning
        p = subprocess.run([client, b"1", hostile(rng)], env=env, capture_output=True)
        if p.returncode != 0 or p.stdout != b"0\n":
            fail(seed, f"log_line_client: {p.returncode} {p.stdout!r} {p.stderr[:500]!r}")
        check_lines(seed, p.stderr, 3, "settings and a message")
        env = base_env()
        env[b"RECAP_LOG"] = b"debug"
        p = subprocess.run([client, b"names", hostile(rng, 300)], env=env, capture_output=True)
        if p.returncode != 0:
            fail(seed, f"log_line_client names: {p.returncode} {p.stderr[:500]!r}")
        check_lines(seed, p.stderr, int(p.stdout), "framework and state names")


ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
LIST_ROOM = 1000  # a list's array in the report, with its NUL (src/report/report.c)


def flagged_name(rng, length):
    """RECAP_ZQ and `length` random characters: no row of src/base/settings.c starts so."""
    return "RECAP_ZQ" + "".join(rng.choice(ALPHABET) for _ in range(length))


def flagged_sets(rng):
    """Lists of distinct names: random ones, then lists whose JSON arrays end near the 1000 bytes
    the report gives them: four names of 200 characters, a fifth of 150 to 220 through the sweep,
    then short ones (in the order the libtool wrapper's shell passes them on, so on which byte
    each ends varies; tests/base/test_json.c's arrays cross every byte)."""
    for _ in range(6):
        names = []
        for _ in range(rng.randint(0, 40)):
            name = flagged_name(rng, rng.randint(0, 192))
            if name not in names:
                names.append(name)
        yield names
    for fifth in range(150 - 8, 221 - 8):
        names = [flagged_name(rng, 192) for _ in range(4)] + [flagged_name(rng, fifth)]
        while len(names) < 8:
            name = flagged_name(rng, rng.randint(0, 3))
            if name not in names:
                names.append(name)
        yield names


def flagged(client, seed):
    rng = random.Random(seed)
    for names in flagged_sets(rng):
        n = len(names)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RECAP_")}
        env.update({name: "1" for name in names})
        with tempfile.TemporaryDirectory() as d:
            env["RECAP_REPORT"] = os.path.join(d, "report")
            p = subprocess.run([client, "1", "hello"], env=env, capture_output=True)
            if p.returncode != 0:
                fail(seed, f"log_line_client: {p.returncode} {p.stderr[:500]!r}")
            if not os.path.exists(env["RECAP_REPORT"]):
                fail(seed, f"no report for {n} flagged: {p.stderr[:500]!r}")
            with open(env["RECAP_REPORT"], "rb") as f:
                lines = f.read().decode("utf-8", errors="strict").splitlines()
        if len(lines) != 1:
            fail(seed, f"{len(lines)} report lines")
        try:
            report = json.loads(lines[0])
        except ValueError as e:
            fail(seed, f"the report is not JSON ({e}): {lines[0][:2000]!r}")
        listed, left_out = report["settings_flagged"], report["settings_flagged_left_out"]
        if len(json.dumps(listed, separators=(",", ":"))) >= LIST_ROOM:
            fail(seed, f"settings_flagged's array outgrew its {LIST_ROOM} bytes: {listed!r}")
        for name in listed:
            if name not in names:
                fail(seed, f"settings_flagged names {name!r}, not in the environment")
        if len(set(listed)) != len(listed) or len(listed) + left_out != n:
            fail(seed, f"{len(listed)} listed + {left_out} left out for {n} flagged")


def main():
    mode, seed = sys.argv[1], int(sys.argv[-1])
    {"log": log, "flagged": flagged}[mode](sys.argv[2], seed)


if __name__ == "__main__":
    main()
