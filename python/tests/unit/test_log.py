# SPDX-License-Identifier: Apache-2.0
"""One log for the job (issue 46): the package's lines are written by librecap
(recap_log_write), so they land where librecap's own lines do (RECAP_LOG_FILE or stderr), with
the same prefix (RECAP_LOG_TIME's time, host:pid:tid, the rank) and under the same RECAP_LOG.
Each case runs in a process of its own, since librecap reads those settings once, at load.
recap._lib only: no torch, no GPU."""
import os
import re
import socket
import subprocess
import sys
import tempfile
import unittest

import recap
from recap import _lib

HERE = os.path.dirname(os.path.abspath(__file__))

# A warning of librecap's own, then the package's lines. The own warning: a capture subscriber
# that fails, told of a capture about to begin (the event comes before any CUDA call, so no
# driver is needed; what will_begin says after it does not matter here).
CHILD = r"""
import ctypes
from recap import _abi, _lib

fail = _abi.SubscriberFn(lambda info, arg: _abi.RECAP_ERR_INVALID_ARG)
sub = ctypes.c_void_p()
_lib.call("recap_capture_subscribe", _abi.RECAP_EVENT_MASK_ALL, fail, None, ctypes.byref(sub))
will_begin = _lib.lib().recap_capture_will_begin
will_begin.argtypes = [ctypes.c_void_p, ctypes.c_int]
will_begin(None, 0)
_lib.call("recap_capture_unsubscribe", sub)
_lib.log_once("warn", "recap.torch: a warning from Python")
_lib.log_once("warn", "recap.torch: a warning from Python")
_lib.log_once("info", "recap.torch: a note from Python")
_lib.log_once("warn", "recap.torch: two\nlines")
"""

# "TIME HOST:PID:TID [RANK] recap LEVEL message", as src/base/log.h writes it.
LINE = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) ([^ :]+):(\d+):(\d+) \[(\d+)\] "
                  r"recap (WARN|INFO|DEBUG) (.*)")
OWN_WARNING = "a capture subscriber failed event 0"


def run_child(code, **settings):
    """Runs `code` with the recap and the librecap this test uses, the RECAP_* settings and
    launcher ranks of this process's environment replaced by `settings`."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("RECAP_") and k != "RECAP_CUDA_DRIVER")
           and k not in ("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK")}
    root = os.path.dirname(os.path.dirname(os.path.abspath(recap.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in
                                                  env.get("PYTHONPATH", "").split(os.pathsep)
                                                  if p])
    env["RECAP_LIB"] = _lib.library_path()
    env.update(settings)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=HERE, env=env)


class OneLog(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="recap-log-")
        self.addCleanup(self.dir.cleanup)

    def files(self):
        return sorted(os.listdir(self.dir.name))

    def test_python_and_c_lines_share_the_file_and_prefix(self):
        r = run_child(CHILD, RANK="3", RECAP_LOG_TIME="1", RECAP_LOG="warn",
                      RECAP_LOG_FILE=os.path.join(self.dir.name, "log.%p"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual((r.stdout, r.stderr), ("", ""))  # nothing on stderr: one sink
        files = self.files()
        self.assertEqual(len(files), 1, files)
        pid = int(files[0].split(".")[1])
        with open(os.path.join(self.dir.name, files[0])) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 3, lines)  # the info line is below RECAP_LOG=warn
        parsed = [LINE.fullmatch(line) for line in lines]
        self.assertTrue(all(parsed), lines)
        own, python, escaped = parsed
        self.assertTrue(own.group(7).startswith(OWN_WARNING), lines[0])
        self.assertEqual(python.group(7), "recap.torch: a warning from Python")  # once
        self.assertEqual(escaped.group(7), r"recap.torch: two\nlines")
        for m in parsed:
            # host, pid, tid (the same thread), rank and level: the C line's, field by field
            self.assertEqual(m.group(2, 3, 4, 5, 6), own.group(2, 3, 4, 5, 6), lines)
        self.assertEqual(own.group(2, 3, 5, 6), (socket.gethostname(), str(pid), "3", "WARN"))

    def test_recap_log_decides_for_python_lines_as_for_c_lines(self):
        r = run_child(CHILD, RECAP_LOG="info", RECAP_LOG_FILE=os.path.join(self.dir.name, "log"))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        with open(os.path.join(self.dir.name, "log")) as f:
            text = f.read()
        self.assertIn(" recap INFO recap.torch: a note from Python\n", text)
        self.assertIn(" recap WARN " + OWN_WARNING, text)
        for level in ("off", "0", None):
            settings = {"RECAP_LOG_FILE": os.path.join(self.dir.name, f"quiet.{level}")}
            if level is not None:
                settings["RECAP_LOG"] = level
            r = run_child(CHILD, **settings)
            self.assertEqual((r.returncode, r.stderr), (0, ""), level)
        self.assertEqual(self.files(), ["log"])  # a process that logs nothing creates no file

    def test_without_librecap_the_line_goes_to_stderr(self):
        code = "from recap import _lib; _lib.log_once('warn', 'recap.torch: no librecap')"
        missing = os.path.join(self.dir.name, "librecap.so.1")
        r = run_child(code, RECAP_LOG="warn", RECAP_LIB=missing, LD_PRELOAD="")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"\A%s:\d+:\d+ recap WARN recap.torch: no librecap\n\Z"
                         % re.escape(socket.gethostname()))
        r = run_child(code, RECAP_LIB=missing, LD_PRELOAD="")
        self.assertEqual((r.returncode, r.stderr), (0, ""))


if __name__ == "__main__":
    unittest.main()
