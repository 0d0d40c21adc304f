"""``python -m trainers.play``: play one episode of a trained run (the command's code: :mod:`trainers.cli.play`)."""

from trainers.cli.play import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
