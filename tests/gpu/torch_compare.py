# SPDX-License-Identifier: Apache-2.0
# Compares two torch_graphs.py runs (plain, preloaded): identical outputs, replay time ratio.
import sys

import torch

a = torch.load(sys.argv[1])
b = torch.load(sys.argv[2])
same = all(torch.equal(x, y) for x, y in zip(a["outs"], b["outs"]))
ratio = b["replay_us"] / a["replay_us"]
print(f"torch_compare: outputs identical: {same}; replay {a['replay_us']:.2f} us plain, "
      f"{b['replay_us']:.2f} us with LD_PRELOAD (ratio {ratio:.3f}); fresh masks: {a['fresh']} / {b['fresh']}")
sys.exit(0 if same and a["fresh"] and b["fresh"] and ratio <= 1.02 else 1)
