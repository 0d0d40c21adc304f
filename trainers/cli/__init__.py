"""The command-line entry points: ``python -m trainers.progpo`` (:mod:`~trainers.cli.train`),
``trainers.evaluate`` (:mod:`~trainers.cli.evaluate`), ``trainers.play``
(:mod:`~trainers.cli.play`) and ``trainers.export`` (:mod:`~trainers.cli.export`). The
commands keep their names: ``trainers/progpo.py`` and its siblings only call these.
"""
