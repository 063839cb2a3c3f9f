# SPDX-License-Identifier: Apache-2.0
"""Paths are bytes: with librecap preloaded from a folder whose name is not UTF-8, and with the
package itself in such a folder, recap._lib finds and loads the library (no UnicodeDecodeError),
reports its path as the same bytes (os.fsencode of what it returns), and recap-run gives the
command LD_PRELOAD, RECAP_LIB and PYTHONPATH holding those bytes. Random non-UTF-8 names."""
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

import recap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(recap.__file__)))


def non_utf8_name(r):
    """A folder name that does not decode as UTF-8 (and holds no '/' or NUL)."""
    bad = [b"\xff", b"\xfe", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\x80", b"\xc0\xaf"]
    name = b"recap-"
    for _ in range(r.randrange(1, 5)):
        name += r.choice(bad) + bytes([r.randrange(0x61, 0x7b)])
    try:
        name.decode("utf-8")
    except UnicodeDecodeError:
        return name
    return name + b"\xff"


def copy_vendored(site):
    """The libraries auditwheel vendored beside the installed package (recap_rng.libs), if any,
    into the copy's site folder."""
    installed = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(
        recap.library_path()))))
    vendored = os.path.join(installed, "recap_rng.libs")
    if os.path.isdir(vendored):
        shutil.copytree(os.fsencode(vendored), os.path.join(site, b"recap_rng.libs"))


class BytesPaths(unittest.TestCase):
    def setUp(self):
        seed = int(os.environ.get("RECAP_TEST_SEED", random.randrange(1 << 30)))
        print(f"RECAP_TEST_SEED={seed}", file=sys.stderr)
        self.r = random.Random(seed)
        self.tmp = tempfile.mkdtemp().encode()
        # The copies sit as a wheel lays them out (site/recap/_lib), below a non-UTF-8 folder:
        # a wheel's librecap finds the libraries auditwheel vendored through its run path,
        # $ORIGIN/../../recap_rng.libs, which are copied along (where there are any).
        self.site = os.path.join(self.tmp, non_utf8_name(self.r))
        self.dir = os.path.join(self.site, b"recap", b"_lib")
        os.makedirs(self.dir)
        copy_vendored(self.site)
        self.lib = os.path.join(self.dir, b"librecap.so.1")
        shutil.copy(os.fsencode(recap.library_path()), self.lib)
        # recap-run preloads the interposer object beside the library (it finds librecap.so.1
        # through $ORIGIN)
        self.interposer = os.path.join(self.dir, b"librecap-preload.so")
        shutil.copy(os.fsencode(recap.preload_path()), self.interposer)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_py(self, code, env_extra, pythonpath=None):
        env = {k: v for k, v in os.environb.items() if not k.startswith(b"RECAP_")}
        env.pop(b"LD_PRELOAD", None)
        env[b"PYTHONPATH"] = pythonpath or os.fsencode(ROOT)
        env.update(env_extra)
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)

    def test_preloaded_from_a_non_utf8_folder(self):
        code = ("import os, recap._lib as L; L.lib(); "
                "print(os.fsencode(L.library_path()).hex())")
        r = self.run_py(code, {b"LD_PRELOAD": self.lib})
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        got = bytes.fromhex(r.stdout.decode().strip())
        self.assertTrue(os.path.samefile(got, self.lib), got)

    def test_recap_lib_names_a_non_utf8_folder(self):
        code = ("import os, recap._lib as L; L.lib(); "
                "print(os.fsencode(L.library_path()).hex())")
        target = self.dir if self.r.randrange(2) else self.lib  # the folder, or the library
        r = self.run_py(code, {b"RECAP_LIB": target})
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(bytes.fromhex(r.stdout.decode().strip()), self.lib)

    def test_package_in_a_non_utf8_folder_runs_recap_run(self):
        pkg = os.path.join(self.dir, b"site")
        shutil.copytree(os.path.join(os.fsencode(ROOT), b"recap"), os.path.join(pkg, b"recap"))
        copy_vendored(pkg)
        code = ("import sys, recap.run; sys.argv = ['recap-run', sys.executable, '-c', "
                "'import os; print(os.environb[b\"LD_PRELOAD\"].hex()); "
                "print(os.environb[b\"PYTHONPATH\"].hex())']; recap.run.main()")
        r = self.run_py(code, {b"LD_PRELOAD": self.lib}, pythonpath=pkg)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        preload, pythonpath = [bytes.fromhex(x) for x in r.stdout.decode().split()]
        self.assertTrue(os.path.samefile(preload.split(b":")[0], self.interposer), preload)
        self.assertIn(os.path.join(pkg, b"recap", b"_autoload"), pythonpath.split(b":"))


if __name__ == "__main__":
    unittest.main()
