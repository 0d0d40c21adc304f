"""Seeds a registered lab block needs: the per-seed SD of an on - off contrast measured in a
finished block, and the seeds a two-sided paired t (alpha 0.05) needs for the power asked at the
effect asked.

    python scripts/lab_power.py --effect 0.08     # the tree replication's figure (configs/credit_lab_tree.yaml)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainers.lab.significance import paired_t_power, seeds_for_power  # after the path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--block",
        type=Path,
        default=ROOT / "benchmarks/results/credit_lab_confirm/credit_lab.json",
        help="a finished block's credit_lab.json (default: the confirmatory block's)",
    )
    ap.add_argument("--on", default="progpo-gigpo+tree", help="the arm with the term on")
    ap.add_argument("--off", default="gigpo+tree", help="the arm with the term off")
    ap.add_argument("--effect", type=float, nargs="+", default=[0.05, 0.08, 0.117], help="effects to power for")
    ap.add_argument("--power", type=float, default=0.8, help="the power asked")
    args = ap.parse_args(argv)
    runs = json.loads(args.block.read_text())["runs"]
    final = {(r["method"], r["seed"]): float(r["eval"][-1]["eval/success"]) for r in runs}
    seeds = sorted(s for m, s in final if m == args.on and (args.off, s) in final)
    diffs = np.array([final[(args.on, s)] - final[(args.off, s)] for s in seeds])
    sd = float(np.std(diffs, ddof=1))
    print(
        f"{args.on} - {args.off} in {args.block.parent.name}: mean {diffs.mean():+.4f}, per-seed SD {sd:.4f} "
        f"over {len(seeds)} seeds"
    )
    print("| effect | seeds for {:.0%} power | power at that many |".format(args.power))
    print("|---|---|---|")
    for effect in args.effect:
        n = seeds_for_power(effect, sd, args.power)
        print(f"| {effect:+.3f} | {n} | {paired_t_power(effect, sd, n):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
