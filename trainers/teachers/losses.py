"""The teachers' losses, pure torch: the symmetric KL (whole distributions or the teacher's top-k),
entropy weights, SEED's gated term and the EMA step.

>>> import torch
>>> p = torch.log(torch.tensor([[0.5, 0.5]])); q = torch.log(torch.tensor([[0.9, 0.1]]))
>>> round(float(symmetric_kl(p, q)), 4)  # 0.5 * (0.5108 + 0.3681)
0.4394
"""

from __future__ import annotations

import torch

__all__ = [
    "ema_update",
    "entropies",
    "entropy_weights",
    "gated_distill",
    "normalised_weights",
    "symmetric_kl",
    "topk_symmetric_kl",
]


def symmetric_kl(teacher_logp: torch.Tensor, student_logp: torch.Tensor) -> torch.Tensor:
    """``0.5 KL(T || S) + 0.5 KL(S || T)`` over the last axis (log-distributions in, one value per row)."""
    kl_ts = (teacher_logp.exp() * (teacher_logp - student_logp)).sum(-1)
    kl_st = (student_logp.exp() * (student_logp - teacher_logp)).sum(-1)
    return 0.5 * kl_ts + 0.5 * kl_st


def topk_symmetric_kl(teacher_top: torch.Tensor, top_index: torch.Tensor, student_logp: torch.Tensor) -> torch.Tensor:
    """:func:`symmetric_kl` on the teacher's top-k tokens, both sides renormalised there.

    ``teacher_top``: ``[n, k]`` teacher log-probs of its top-k tokens; ``top_index``: ``[n, k]``
    their ids; ``student_logp``: ``[n, V]``.
    """
    s = torch.log_softmax(student_logp.gather(-1, top_index), dim=-1)
    return symmetric_kl(torch.log_softmax(teacher_top, dim=-1), s)


def entropies(logp: torch.Tensor) -> torch.Tensor:
    """The entropy of each row of a log-distribution."""
    p = logp.exp()
    return -torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(-1)


def entropy_weights(teacher_logp: torch.Tensor, beta: float = 1.0, clip: float = 2.0) -> torch.Tensor:
    """Per row: ``exp(-beta * H_T)``, normalised to mean 1 over the rows, clipped at ``clip`` (a
    confident teacher weighs more, no row more than ``clip`` times the mean).

    >>> w = entropy_weights(torch.log(torch.tensor([[1.0, 1e-9], [0.5, 0.5]])))
    >>> [round(v, 4) for v in w.tolist()]  # exp(0) and exp(-ln 2), over their mean 0.75
    [1.3333, 0.6667]
    """
    return normalised_weights(entropies(teacher_logp), beta, clip)


def normalised_weights(h: torch.Tensor, beta: float = 1.0, clip: float = 2.0) -> torch.Tensor:
    """``exp(-beta * h)`` normalised to mean 1, clipped at ``clip`` (rows of any lengths, their
    entropies ``h`` concatenated)."""
    w = torch.exp(-beta * h)
    return (w / w.mean().clamp_min(1e-12)).clamp(max=clip)


def gated_distill(l_theta: torch.Tensor, l_skill: torch.Tensor, beta: float = 5.0) -> tuple[torch.Tensor, torch.Tensor]:
    """SEED's gated on-policy distillation term per token and its gate:
    ``g * (sg[l_skill] - l_theta)`` with ``g = sigmoid(beta * sg[l_skill - l_theta])``.

    >>> t, g = gated_distill(torch.tensor([-2.0]), torch.tensor([-1.0]))
    >>> round(float(g), 4), round(float(t), 4)
    (0.9933, 0.9933)
    """
    gate = torch.sigmoid(beta * (l_skill - l_theta).detach())
    return gate * (l_skill.detach() - l_theta), gate


@torch.no_grad()
def ema_update(teacher: torch.nn.Module, student: torch.nn.Module, tau: float) -> None:
    """``theta_T <- (1 - tau) theta_T + tau theta_S`` for every parameter (buffers copied)."""
    for pt, ps in zip(teacher.parameters(), student.parameters()):
        pt.mul_(1.0 - tau).add_(ps.detach().to(pt.dtype), alpha=tau)
    for bt, bs in zip(teacher.buffers(), student.buffers()):
        bt.copy_(bs)
