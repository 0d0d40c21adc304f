"""``python -m trainers.lab``: :func:`trainers.lab.cli.main`."""

from trainers.lab.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
