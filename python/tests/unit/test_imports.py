# SPDX-License-Identifier: Apache-2.0
"""The package's modules import one another without a circle, function-level imports included
(a circle hidden inside a function still ties two modules into one): every import of a recap
module, read from the sources with ast, and the graph they make checked for cycles."""
import ast
import os
import unittest

import recap

PKG = os.path.dirname(os.path.abspath(recap.__file__))


def modules():
    out = {}
    for root, dirs, files in os.walk(PKG):
        dirs[:] = [d for d in dirs if d not in ("csrc", "include", "_lib", "__pycache__")]
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                name = "recap." + os.path.relpath(path, PKG)[:-3].replace(os.sep, ".")
                out[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    out["recap"] = out.pop("recap.__init__", os.path.join(PKG, "__init__.py"))
    return out


def imports(mods):
    """module -> the recap modules it imports. `from . import x` imports the submodule x where
    there is one, the package only for names that are not modules."""
    edges = {m: set() for m in mods}
    for m, path in mods.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        package = m if path.endswith("__init__.py") else m.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] +
                                    ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                subs = [base + "." + a.name for a in node.names]
                found = [s for s in subs if s in mods]
                if len(found) < len(subs):
                    found.append(base)
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            edges[m].update(t for t in found if t in mods and t != m)
    return edges


def cycle(edges):
    """One cycle as a list of modules, or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state:
                c = visit(t)
                if c:
                    return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            c = visit(m)
            if c:
                return c
    return None


class Imports(unittest.TestCase):
    def test_no_circle(self):
        mods = modules()
        self.assertIn("recap.torch", mods)
        c = cycle(imports(mods))
        self.assertIsNone(c, "import circle: " + " -> ".join(c or []))

    def test_the_check_finds_a_circle(self):
        # the checker itself, on a circle made up here (a -> b -> c -> a)
        self.assertEqual(cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}),
                         ["a", "b", "c", "a"])
        self.assertIsNone(cycle({"a": {"b"}, "b": set()}))


if __name__ == "__main__":
    unittest.main()
