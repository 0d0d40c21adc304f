"""The credit-trap lab: remedies side by side in the credit trap, seed by seed, resumable, re-runnable.

Four parts: :mod:`~trainers.lab.methods` (the method registry), :mod:`~trainers.lab.runs` (the
runner), :mod:`~trainers.lab.analysis` (paired differences, validity under the pre-registered
criteria, test families; :mod:`~trainers.lab.significance` holds its tests) and
:mod:`~trainers.lab.report` (the table and plots); :mod:`~trainers.lab.cli` is the command line,
:mod:`~trainers.lab.verify` and :mod:`~trainers.lab.compare` read recorded runs against a commit or
against another copy of the block.

    python -m trainers.lab --lab alfworld    # every remedy on the pre-registered setting
    python -m trainers.lab --lab webshop     # the WebShop block
    python -m trainers.lab --lab confirm     # the pre-registered confirmatory experiment
    python -m trainers.lab --pilot           # 2 seeds x the main pair: the MDE
    python -m trainers.lab                   # ProGPO vs its base (resumes where it stopped)
    python -m trainers.lab --rerun 0 progpo-gigpo --iterations 2   # check a recorded run
    python -m trainers.lab --report          # the table of the runs finished so far
    python -m trainers.lab --lab alfworld --compare-with DIR   # which runs another copy reproduces

(``python -m trainers.lab`` takes the same flags.)

``--lab`` is the lab (``configs/credit_lab.yaml``: its setting, primary and secondary metrics and
validity criteria, ``notes: preregistration: validity:``, were fixed before its comparison ran). Its report opens with the validity verdict
(can it tell GiGPO from GRPO?), then every method against ``gigpo`` and ``progpo-gigpo``, paired by
seed, on the final held-out success (primary) and the area under the held-out success curve
(secondary), the labelled tracks apart from pure RL, the primary comparisons against ``gigpo``
tested as one family (paired t-tests, Holm-adjusted), ProGPO's term on and off over each base
(exploratory), and where each remedy's term acted; it writes ``credit_lab.json`` (every run, the
verdict, the family tests, the on/off contrast, and ``pilot.json``'s settings tried before the
pre-registration). Without ``--lab`` the tool runs the earlier comparison, ProGPO against its base
on the trap preset.

Setting: ``--config`` (default ``configs/alfworld_trap.yaml``: no repeat masking, no exploration
hints in the prompt, a weak warm start, so most groups fail completely). Every method of a seed
starts from the same weights (the warm start is deterministic in the seed), plays the same task
schedule and the same number of episodes per iteration. Methods (``--methods``):

* ``gigpo`` / ``progpo-gigpo``: the main pair (the CPU default's base);
* ``grpo`` / ``progpo-grpo``: the episode-level pair;
* ``always`` (the progress term in every group) and ``shuffled`` (coverage permuted within each
  all-failed group): the controls of ProGPO(GiGPO).
* the other remedies, each named by its estimator, collector and teacher: ``planpo``,
  ``progpo-planpo``, ``hgpo``, ``progpo-hgpo``, ``gigpo+tree``, ``progpo-gigpo+tree``,
  ``gigpo+tree-random`` (the tree's control), and the labelled tracks ``gigpo+hindsight`` and
  ``gigpo+privileged`` (privileged information: not pure RL, never ranked with the others).
  They run when named in ``--methods``.

Each run is ``python -m trainers.progpo`` in a subprocess (``--workers`` at a time, one torch
thread each) with ``--save-every 1``: a run stopped part-way resumes from its last iteration.
Finished runs keep their ``metrics.jsonl`` and ``config.yaml`` under ``--out``/runs/ (small; the
checkpoints live in ``--work``), so a comparison can be carried on after the checkpoints are gone:
only unfinished runs start again. ``--pilot`` writes its table elsewhere (``--out`` + ``_pilot``)
but shares the runs: its runs are the comparison's seeds 0 and 1 of the main pair.

Output (``--out``, default ``benchmarks/results/progpo_effect``): ``table.md`` (eval success at
the start, middle and end, train success, all-failed fraction, coverage, repeat rate: mean and 95%
t interval over seeds; episodes needed to reach success levels; the paired final difference of
each pair; with ``--pilot``, the minimum detectable difference at 80% power for the planned
seeds), ``curves.png`` and ``progpo_effect.json`` (every run's method, seed, state key, full config,
per-iteration train metrics and eval records, per task type).

``--rerun SEED METHOD --iterations N`` re-runs the first N iterations of that recorded run with
its recorded config (same machine: bit-for-bit), prints every compared train metric and exits 1
when any differs. ``--compare-with DIR`` reads every finished run against the same run kept in
another copy of the block (a re-run at another commit or on another machine): bit-exact, or the
largest relative difference and its field, run by run.
"""

from __future__ import annotations

from trainers.lab.analysis import ValidityCriteria, auc, families, paired, progpo_on_off, validity, validity_criteria
from trainers.lab.methods import AXES, LAB_PRESETS, METHOD_AXES, METHODS, axes_of, labelled
from trainers.lab.runs import LabError, load_run, rerun, run_one, strict_compare

__all__ = [
    "AXES",
    "LAB_PRESETS",
    "LabError",
    "METHODS",
    "METHOD_AXES",
    "ValidityCriteria",
    "auc",
    "axes_of",
    "families",
    "labelled",
    "load_run",
    "paired",
    "progpo_on_off",
    "rerun",
    "run_one",
    "strict_compare",
    "validity",
    "validity_criteria",
]
