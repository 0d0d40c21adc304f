"""The credit-trap lab (:mod:`trainers.lab`): ``python benchmarks/progpo_effect.py ARGS`` is
``python -m trainers.lab ARGS``.

    python benchmarks/progpo_effect.py --lab alfworld             # every remedy on the pre-registered setting
    python benchmarks/progpo_effect.py --lab confirm              # the pre-registered confirmatory experiment
    python benchmarks/progpo_effect.py --report                   # the table of the runs finished so far
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainers.lab.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
