"""``python -m trainers.export``: export a trained run as a Hugging Face model directory (the command's code: :mod:`trainers.cli.export`)."""

from trainers.cli.export import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
