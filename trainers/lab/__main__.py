"""``python -m trainers.lab``: :func:`trainers.lab.cli.main`."""
from trainers.lab.cli import main

raise SystemExit(main())
