"""What the trainer calls on a teacher (:class:`Teacher`), and the defaults most teachers share
(:class:`TeacherBase`). Standard library only: a plug-in states its teacher's shape without
importing torch.

A teacher is built once per run by its registration's ``make(cfg, policy, model)``
(:class:`trainers.teachers.registry.TeacherSpec`). Each iteration the loop asks it for its
:meth:`~Teacher.inputs` of the rollout, and the update for the steps it :meth:`~Teacher.kept` at
zero advantage and its :meth:`~Teacher.loss_targets` of the update's steps: the term
(:class:`trainers.loop.ppo.AuxTerm`) that adds to each micro-batch's RL loss. A term that also
takes some steps away from the RL loss (the privileged teacher's all-failed groups) is a
:class:`trainers.loop.ppo.RoutingTerm`; none needs to be.

>>> class Quiet(TeacherBase):
...     def inputs(self, rollout, step_failed, env="this"): return None
...     def kept(self, inputs, n_steps): return [False] * n_steps
...     def loss_targets(self, steps, chosen, inputs, iteration): return None, {}
>>> t: Teacher = Quiet()
>>> t.ema is None, t.samples, t.kept(None, 2)
(True, [], [False, False])
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

from wrappers.errors import UserError

__all__ = ["Teacher", "TeacherBase"]


@runtime_checkable
class Teacher(Protocol):
    """Every attribute and method the loop, the update and the checkpoints use of a teacher.

    Attributes:
        ema: weights a checkpoint keeps and restores (an EMA of the student), or ``None``.
        samples: what the teacher read, appended as it goes; the loop writes and empties it into
            ``distill_samples.jsonl`` after each iteration.
    """

    ema: Any
    samples: list[dict[str, Any]]

    def inputs(self, rollout: Any, step_failed: Sequence[bool], env: str = "this") -> Any:
        """What the teacher needs of an iteration's ``rollout`` (``step_failed``: per step, whether
        its group failed completely; ``env``: the env's name, for messages). Its ``metrics``
        attribute, where it has one, goes into the iteration's record."""

    def kept(self, inputs: Any, n_steps: int) -> Sequence[bool]:
        """Per step, whether it takes a loss even at zero advantage (it carries this teacher's term)."""

    def loss_targets(
        self, steps: Sequence[Any], chosen: Sequence[int], inputs: Any, iteration: int
    ) -> tuple[Any, dict[str, float]]:
        """The update's term for the ``chosen`` steps (:class:`trainers.loop.ppo.AuxTerm`), built
        without gradient, and its statistics for the record."""

    def after_step(self) -> None:
        """Called after every optimizer step (an EMA teacher follows the student here)."""

    def ensure_ema(self) -> Any:
        """The EMA weights, created where missing: a resume loads a checkpoint's EMA weights into them."""


class TeacherBase:
    """The defaults of a teacher without EMA weights: no ``ema``, an empty ``samples`` list,
    nothing after an optimizer step. A subclass writes :meth:`inputs`, :meth:`kept` and
    :meth:`loss_targets` (:class:`Teacher`)."""

    #: the registered name, written with each sample
    name = "teacher"

    def __init__(self) -> None:
        self.ema: Any = None
        self.samples: list[dict[str, Any]] = []

    def after_step(self) -> None:
        """Nothing follows the student."""

    def ensure_ema(self) -> Any:
        """A teacher without EMA weights has none to restore: a checkpoint that holds some was
        written by another teacher."""
        if self.ema is None:
            raise UserError(
                f"the checkpoint holds EMA teacher weights, but the teacher {self.name!r} keeps none; "
                "resume with the teacher that wrote it"
            )
        return self.ema
