"""`python -m trainers.progpo`: train an LLM agent with ProGPO (placeholder until the trainer lands)."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("trainers.progpo: the training loop has not landed yet (see issue 'trainers/').", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
