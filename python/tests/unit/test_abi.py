# SPDX-License-Identifier: Apache-2.0
"""The package's C declarations against include/recap.h: every constant, structure field and
function prototype the package uses must be the header's (no GPU, no torch needed)."""
import ctypes
import glob
import os
import re
import unittest

from recap import _abi

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
# recap.h and the headers it includes (every include/recap/*.h: philox, the core's parts, the
# add-ons): the source
# tree's, or where the tests run away from one (an installed sdist or wheel), the copy the package
# ships (recap/include).
INCLUDE = os.path.join(ROOT, "include")
if not os.path.exists(os.path.join(INCLUDE, "recap.h")):
    INCLUDE = os.path.join(os.path.dirname(os.path.abspath(_abi.__file__)), "include")
HEADERS = [os.path.join(INCLUDE, "recap.h")] + sorted(
    glob.glob(os.path.join(INCLUDE, "recap", "*.h")))


def _source():
    text = ""
    for h in HEADERS:
        with open(h) as f:
            text += f.read() + "\n"
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


SRC = _source()


def _defines():
    out = {}
    for m in re.finditer(r"^\s*#define\s+(RECAP_\w+)\s+(.+?)\s*$", SRC, flags=re.M):
        out[m.group(1)] = m.group(2).strip()
    return out


def _enum_values():
    out = {}
    for body in re.findall(r"(?:typedef\s+)?enum\s*\w*\s*\{(.*?)\}", SRC, flags=re.S):
        for m in re.finditer(r"(RECAP_\w+)\s*=\s*([^,}]+)", body):
            out[m.group(1)] = m.group(2).strip()
    return out


def _eval(expr, env):
    expr = expr.replace("u", "") if re.fullmatch(r"[0-9xa-fA-Fu<>() ]+", expr) else expr
    return eval(expr, {}, env)  # noqa: S307 - the project's own header


def _struct_fields(typedef):
    m = re.search(r"\}\s*" + re.escape(typedef) + r"\s*;", SRC)
    if m is None:
        raise AssertionError(f"{typedef} not found in the headers")
    end, depth, i = m.start(), 0, m.start()
    while i >= 0:  # back to the brace that opens this struct's body
        depth += SRC[i] == "}"
        depth -= SRC[i] == "{"
        if depth == 0:
            break
        i -= 1
    fields = []
    for decl in SRC[i + 1:end].split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
        if fp:
            fields.append(fp.group(1))
            continue
        # "uint64_t a, b" / "const char *name" / "char name[64]"
        parts = [p.strip() for p in decl.split(",")]
        first = re.sub(r"\[.*?\]", "", parts[0]).replace("*", " ").split()[-1]
        fields.append(first)
        for p in parts[1:]:
            fields.append(re.sub(r"\[.*?\]", "", p).replace("*", " ").split()[-1])
    return fields


def _prototypes():
    out = {}
    for m in re.finditer(r"RECAP_API\s+([^;{]*?)\b(recap_\w+)\s*\(([^;]*?)\)\s*;", SRC, flags=re.S):
        params = " ".join(m.group(3).split())
        depth, count = 0, 0 if params in ("", "void") else 1
        for ch in params:
            depth += ch == "("
            depth -= ch == ")"
            count += ch == "," and depth == 0
        out[m.group(2)] = (" ".join(m.group(1).split()), count)
    return out


class HeaderAgreement(unittest.TestCase):
    def test_constants_equal_the_header(self):
        defines, enums = _defines(), _enum_values()
        env = {}
        for k, v in list(enums.items()):
            try:
                env[k] = _eval(v, env)
            except Exception:  # noqa: BLE001 - expressions of other enums
                pass
        checked = 0
        for name in dir(_abi):
            if not name.startswith("RECAP_"):
                continue
            value = getattr(_abi, name)
            if name in defines:
                raw = defines[name]
                want = raw.strip('"') if raw.startswith('"') else _eval(raw.strip("()"), env)
            elif name in env:
                want = env[name]
            else:
                self.fail(f"{name} is not in include/recap.h")
            self.assertEqual(value, want, name)
            checked += 1
        self.assertGreater(checked, 20)

    def test_status_names_equal_the_enum(self):
        enums = _enum_values()
        statuses = {int(v): k for k, v in enums.items()
                    if k.startswith("RECAP_ERR_") or k == "RECAP_OK"}
        self.assertEqual(statuses, _abi.STATUS_NAMES)

    def test_structures_have_the_header_fields_in_order(self):
        for typedef, cls in _abi.STRUCTS.items():
            names = [f[0] for f in cls._fields_]
            self.assertEqual(names, _struct_fields(typedef), typedef)

    def test_structure_sizes_follow_from_the_fields(self):
        # On the platforms recap builds for, pointers and size_t are 8 bytes.
        self.assertEqual(ctypes.sizeof(_abi.FrameworkOps), 8 + 8 * 12)
        self.assertEqual(ctypes.sizeof(_abi.ParallelRanks), 40)

    def test_functions_exist_with_the_header_parameter_count(self):
        protos = _prototypes()
        for name, (argtypes, restype) in _abi.DECLS.items():
            self.assertIn(name, protos, f"{name} is not declared in include/recap.h")
            self.assertEqual(len(argtypes), protos[name][1], name)
            ret = protos[name][0]
            want = {"recap_status_t": ctypes.c_int, "int": ctypes.c_int,
                    "const char *": ctypes.c_char_p}[ret]
            self.assertIs(restype, want, name)

    def test_abi_needed_is_the_newest_the_header_names(self):
        # recap.h marks each addition "(ABI 1.N)": the package needs the newest it declares, so
        # an older librecap is refused by _lib before a missing symbol could be met.
        with open(HEADERS[0]) as f:
            marks = [tuple(map(int, m)) for m in re.findall(r"\(ABI (\d+)\.(\d+)\)", f.read())]
        self.assertTrue(marks)
        self.assertEqual(_abi.ABI_NEEDED, max(marks))

    def test_python_version_is_the_c_library_version(self):
        from recap import __version__, library_version
        if os.path.exists(os.path.join(ROOT, "configure.ac")):
            with open(os.path.join(ROOT, "configure.ac")) as f:
                ac = f.read()
            parts = [re.search(r"m4_define\(\[recap_%s\],\s*\[(\d+)\]\)" % k, ac).group(1)
                     for k in ("major", "minor", "patch")]
            self.assertEqual(__version__, ".".join(parts))
        with open(os.path.join(INCLUDE, "recap", "version.h")) as f:  # (configure made it)
            self.assertIn(f'#define RECAP_VERSION_STRING "{__version__}"', f.read())
        self.assertEqual(library_version(), __version__)


if __name__ == "__main__":
    unittest.main()
