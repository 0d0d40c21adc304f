"""``python -m trainers.evaluate``: evaluate a trained run (the command's code: :mod:`trainers.cli.evaluate`)."""

from trainers.cli.evaluate import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
