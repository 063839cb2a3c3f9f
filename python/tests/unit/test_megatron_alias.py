# SPDX-License-Identifier: Apache-2.0
"""recap.megatron.install() against the real Megatron-Core, without a GPU: Megatron's
tensor_parallel.random becomes recap.megatron whether Megatron was imported before install() or
after (megatron_alias.py says what is checked). RECAP_TEST_MEGATRON_CORE names a folder holding
Megatron-Core's `megatron` package (.ci/run unpacks the release recap.megatron follows there):
set, it must hold one; unset, the tests skip."""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CORE = os.environ.get("RECAP_TEST_MEGATRON_CORE", "")


class MegatronAlias(unittest.TestCase):
    def setUp(self):
        if not CORE:
            self.skipTest("no Megatron-Core (RECAP_TEST_MEGATRON_CORE)")
        self.assertTrue(os.path.isdir(os.path.join(CORE, "megatron")),
                        f"RECAP_TEST_MEGATRON_CORE={CORE!r} holds no megatron package")

    def run_mode(self, mode):
        path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), CORE) if p)
        r = subprocess.run([sys.executable, os.path.join(HERE, "megatron_alias.py"), mode],
                           env=dict(os.environ, PYTHONPATH=path), capture_output=True,
                           text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertEqual(r.stdout.strip().splitlines()[-1], f"ok {mode}")

    def test_installed_after_megatron_was_imported(self):
        self.run_mode("after")

    def test_installed_before_megatron_is_imported(self):
        self.run_mode("before")


if __name__ == "__main__":
    unittest.main()
