"""An alias of ``python -m trainers.lab`` (the credit-trap lab's one command), kept for old scripts."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainers.lab.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
