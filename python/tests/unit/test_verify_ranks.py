# SPDX-License-Identifier: Apache-2.0
"""One verdict for every rank: in a job of several ranks (gloo, CPU), a graph mismatch that one
rank finds makes every rank raise at that check, and none is left waiting in its next
collective. Random world sizes, numbers of checks and ranks that find a mismatch; a rank that
runs one check more than the others keeps its own verdict after the agreement's timeout."""
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

try:
    import torch
    import torch.distributed as dist
    HAVE_GLOO = dist.is_available() and dist.is_gloo_available()
except ImportError:
    torch = None
    HAVE_GLOO = False

import recap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(recap.__file__)))

# One rank: runs the checks of its plan (a list of checks, each "bad" or "ok" for this rank),
# then a collective (what a rank left behind by another's raise would hang in), then prints what
# each check did.
RANK = r"""
import json, os, sys, datetime
import torch, torch.distributed as dist
from recap import _verify
rank, world, store_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
plan = json.loads(sys.argv[4])
_verify.AGREE_TIMEOUT_S = float(sys.argv[5])
dist.init_process_group("gloo", init_method="file://" + store_file, rank=rank,
                        world_size=world, timeout=datetime.timedelta(seconds=60))
x = torch.arange(16, dtype=torch.float32)
out = []
for bad in plan:
    ver = _verify.Verifier("test step")
    ver.eager(lambda: [("y", x * 2)])
    ver.capture(lambda: None)
    def replay(bad=bad):
        y = x * 2
        if bad:
            y[3] += 1
        return [("y", y)]
    ver.replay(replay)
    try:
        ver.check("raise")
        out.append(["passed", ""])
    except _verify.GraphMismatch as e:
        out.append(["raised", str(e).splitlines()[0]])
if len(plan) == int(sys.argv[6]):  # the ranks with the common number of checks meet again
    t = torch.ones(1)
    dist.all_reduce(t, group=dist.new_group(sorted(json.loads(sys.argv[7]))))
print(json.dumps(out))
dist.destroy_process_group()
"""


@unittest.skipUnless(HAVE_GLOO, "torch with gloo needed")
class Ranks(unittest.TestCase):
    def setUp(self):
        seed = int(os.environ.get("RECAP_TEST_SEED", random.randrange(1 << 30)))
        print(f"RECAP_TEST_SEED={seed}", file=sys.stderr)
        self.r = random.Random(seed)
        self.tmp = tempfile.mkdtemp()

    def job(self, plans, timeout_s=120.0, common=None):
        world = len(plans)
        common = len(plans[0]) if common is None else common
        meet = [r for r in range(world) if len(plans[r]) == common]
        store = os.path.join(self.tmp, "store")
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("RECAP_VERIFY_GRAPHS", None)
        env["RECAP_LOG"] = "warn"
        procs = [subprocess.Popen([sys.executable, "-c", RANK, str(r), str(world), store,
                                   json.dumps(plans[r]), str(timeout_s), str(common),
                                   json.dumps(meet)],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for r in range(world)]
        outs = []
        for r, p in enumerate(procs):
            try:
                so, se = p.communicate(timeout=150)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                self.fail(f"rank {r} hangs (plans {plans})")
            self.assertEqual(p.returncode, 0, f"rank {r}: {se[-2000:]}")
            outs.append((json.loads(so.strip().splitlines()[-1]), se))
        return outs

    def test_every_rank_raises_where_one_finds_a_mismatch(self):
        # One job (each rank imports torch: seconds): the common checks, then one check more on
        # one rank, which keeps its own verdict once the agreement's timeout has passed.
        world = self.r.randrange(2, 4)
        checks = self.r.randrange(1, 4)
        bad = [[self.r.random() < 0.3 for _ in range(world)] for _ in range(checks)]
        bad[self.r.randrange(checks)][self.r.randrange(world)] = True  # at least one
        extra, bad_extra = self.r.randrange(world), self.r.random() < 0.5
        plans = [[bad[c][r] for c in range(checks)] + ([bad_extra] if r == extra else [])
                 for r in range(world)]
        outs = self.job(plans, timeout_s=10.0, common=checks)
        for c in range(checks):
            finders = [r for r in range(world) if bad[c][r]]
            for r in range(world):
                what, text = outs[r][0][c]
                ctx = (c, r, plans)
                if not finders:
                    self.assertEqual(what, "passed", ctx)
                    continue
                self.assertEqual(what, "raised", ctx)
                if bad[c][r]:
                    self.assertIn("first replay of the captured graph does not compute", text,
                                  ctx)
                else:
                    self.assertIn(f"{len(finders)} of {world} ranks found", text, ctx)
                    self.assertIn(f"(rank {min(finders)}: " if len(finders) == 1 else
                                  "(rank ", text, ctx)
        self.assertEqual(outs[extra][0][checks][0], "raised" if bad_extra else "passed", plans)
        self.assertIn("could not agree with the other ranks", outs[extra][1])
        for r in range(world):
            if r != extra:
                self.assertNotIn("could not agree", outs[r][1], (r, plans))


if __name__ == "__main__":
    unittest.main()
