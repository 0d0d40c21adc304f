"""``python -m trainers.progpo``: train a policy (the command's code: :mod:`trainers.cli.train`)."""

from trainers.cli.train import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
