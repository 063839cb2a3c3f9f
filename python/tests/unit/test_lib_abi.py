# SPDX-License-Identifier: Apache-2.0
"""A library the package cannot use is one ImportError naming the file, the ABI found and the
ABI needed, with the fix; never an AttributeError for a missing symbol. The files: a shared
object that is not librecap, and stand-ins for librecap at random ABI versions (older minors,
other majors, and a newer-looking one that lacks functions), each through RECAP_LIB and, for the
stand-ins, preloaded (the copy the package must use when one is in the process)."""
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

import recap
from recap import _abi

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(recap.__file__)))

# A stand-in librecap: recap_abi_version returns what the environment says, nothing else exists.
FAKE = r"""
#include <stdlib.h>
int recap_abi_version(void)
{
    const char *v = getenv("FAKE_RECAP_ABI");
    return v ? (int)strtol(v, NULL, 0) : 0;
}
"""

CODE = """
import recap
try:
    recap.abi_version()
except ImportError as e:
    print("ImportError:", e)
except Exception as e:
    print("other:", type(e).__name__, e)
else:
    print("loaded")
"""


class UnusableLibrary(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
        if cc is None:
            raise unittest.SkipTest("no C compiler to build a stand-in librecap")
        src = os.path.join(cls.tmp, "fake.c")
        with open(src, "w") as f:
            f.write(FAKE)
        cls.fake = os.path.join(cls.tmp, "librecap.so.1")
        subprocess.run([cc, "-shared", "-fPIC", "-o", cls.fake, src], check=True)
        seed = int(os.environ.get("RECAP_TEST_SEED", random.randrange(1 << 30)))
        print(f"RECAP_TEST_SEED={seed}", file=sys.stderr)
        cls.r = random.Random(seed)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def run_py(self, **env_extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith("RECAP_")}
        env.pop("LD_PRELOAD", None)
        env["PYTHONPATH"] = ROOT
        env.update(env_extra)
        p = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.strip()

    def test_not_a_librecap(self):
        libm = None
        for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                  "/lib", "/usr/lib"):
            if os.path.exists(os.path.join(d, "libm.so.6")):
                libm = os.path.join(d, "libm.so.6")
                break
        self.assertIsNotNone(libm, "no libm.so.6 to stand for another shared object")
        out = self.run_py(RECAP_LIB=libm)
        self.assertTrue(out.startswith("ImportError:"), out)
        self.assertIn(libm, out)
        self.assertIn("not a librecap", out)
        self.assertIn("ABI %d.%d" % _abi.ABI_NEEDED, out)
        self.assertIn("RECAP_LIB", out)

    def versions(self):
        major, minor = _abi.ABI_NEEDED
        cases = [(major, self.r.randrange(0, minor)) for _ in range(3)]  # older minors
        cases += [(self.r.choice([0, major + 1, major + self.r.randrange(2, 9)]),
                   self.r.randrange(0, 40)) for _ in range(2)]  # other majors
        cases += [(major, minor + self.r.randrange(0, 30))]  # new enough, functions missing
        self.r.shuffle(cases)
        return cases

    def check_version(self, found, out):
        major, minor = _abi.ABI_NEEDED
        self.assertTrue(out.startswith("ImportError:"), (found, out))
        self.assertIn(self.fake, out)
        self.assertIn("ABI %d.%d" % found, out)
        self.assertIn("ABI %d.%d" % (major, minor), out)
        if found[0] == major and found[1] >= minor:
            # the first function DECLS declares after the version itself
            first = [n for n in _abi.DECLS if n != "recap_abi_version"][0]
            self.assertIn("lacks " + first, out)
        self.assertNotIn("AttributeError", out)

    def test_stand_ins_through_recap_lib(self):
        for found in self.versions():
            out = self.run_py(RECAP_LIB=self.fake, FAKE_RECAP_ABI=str((found[0] << 16) | found[1]))
            self.check_version(found, out)

    def test_stand_ins_preloaded(self):
        # A librecap in the process is the one the package must use: refused, not replaced by
        # another copy.
        for found in self.versions()[:3]:
            out = self.run_py(LD_PRELOAD=self.fake,
                              FAKE_RECAP_ABI=str((found[0] << 16) | found[1]))
            self.check_version(found, out)

    def test_the_real_library_is_accepted(self):
        self.assertEqual(recap.abi_version()[0], _abi.ABI_NEEDED[0])
        self.assertGreaterEqual(recap.abi_version()[1], _abi.ABI_NEEDED[1])


if __name__ == "__main__":
    unittest.main()
