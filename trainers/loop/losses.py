"""PPO-clip policy loss over response tokens, low-variance KL and entropy estimates.

All functions take flat per-token tensors (every response token of a mini-batch concatenated)
and return token-mean quantities, as in GRPO / GiGPO / DAPO-style trainers.

>>> import torch
>>> lp = torch.log(torch.tensor([0.5, 0.5]))
>>> out = ppo_clip_loss(lp, lp, torch.tensor([1.0, -1.0]))
>>> float(out.loss), float(out.clip_fraction)
(0.0, 0.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["PolicyLoss", "low_var_kl", "ppo_clip_loss"]


@dataclass
class PolicyLoss:
    """Loss to minimize (with grad) and detached diagnostics."""

    loss: torch.Tensor
    pg_loss: torch.Tensor
    kl: torch.Tensor
    entropy: torch.Tensor
    clip_fraction: torch.Tensor
    approx_kl_old: torch.Tensor


def low_var_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, clamp: float = 10.0) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || pi_ref): ``exp(r) - r - 1`` with ``r = ref - logp``.

    Non-negative, unbiased for samples of pi, clamped to ``[-clamp, clamp]`` like verl's
    ``low_var_kl``.

    >>> float(low_var_kl(torch.tensor([-1.0]), torch.tensor([-1.0]))[0])
    0.0
    """
    r = (ref_logprobs - logprobs).clamp(-20.0, 20.0)
    return (torch.exp(r) - r - 1.0).clamp(-clamp, clamp)


def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_eps: float = 0.2,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    entropy_coef: float = 0.0,
    weight: float = 1.0,
    entropies: torch.Tensor | None = None,
    token_weights: torch.Tensor | None = None,
) -> PolicyLoss:
    """Token-mean PPO-clip loss (+ ``kl_coef`` * k3 KL to ``ref`` - ``entropy_coef`` * entropy).

    ``advantages`` holds one value per token (the step's advantage broadcast over its response
    tokens). ``weight`` rescales the returned loss (gradient accumulation over micro-batches:
    ``tokens in micro-batch / tokens in mini-batch``) without changing the diagnostics.
    ``entropies``: exact per-token entropies of the sampling distribution, WITH grad
    (the policy's ``compute_logprobs_and_entropy``). The entropy bonus (``entropy_coef > 0``)
    needs them: the sampled-token estimate ``-mean(log pi(a_t))`` has zero expected gradient
    on-policy (``E_pi[grad log pi] = 0``), so it would add noise, not entropy; without
    ``entropies`` the bonus raises ``ValueError``. With ``entropy_coef == 0`` the reported
    ``entropy`` is that estimate, detached (a diagnostic only).
    ``token_weights``: a weighted mean instead of the token mean (``sum(w * loss_t) / sum(w)``
    for the policy and KL terms), e.g. ``1 / |trajectory|`` per token for a trajectory-mean loss
    in which a long failed episode weighs as much as a short won one.

    >>> lp = torch.log(torch.tensor([0.5, 0.5]))
    >>> float(ppo_clip_loss(lp, lp, torch.tensor([1.0, 0.0]), token_weights=torch.tensor([3.0, 1.0])).pg_loss)
    -0.75
    """
    if not (logprobs.shape == old_logprobs.shape == advantages.shape):
        raise ValueError(
            f"shape mismatch: logprobs {tuple(logprobs.shape)}, old {tuple(old_logprobs.shape)}, "
            f"advantages {tuple(advantages.shape)}"
        )
    log_ratio = (logprobs - old_logprobs).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps)
    if token_weights is not None:
        if token_weights.shape != logprobs.shape:
            raise ValueError(
                f"shape mismatch: token_weights {tuple(token_weights.shape)}, logprobs {tuple(logprobs.shape)}"
            )
        w = token_weights.to(logprobs.dtype) / token_weights.sum().clamp_min(1e-12)
    else:
        w = torch.full_like(logprobs, 1.0 / max(int(logprobs.numel()), 1))
    pg_loss = (w * torch.maximum(unclipped, clipped)).sum()
    if entropies is not None:
        if entropies.shape != logprobs.shape:
            raise ValueError(f"shape mismatch: entropies {tuple(entropies.shape)}, logprobs {tuple(logprobs.shape)}")
        entropy = entropies.mean()
    elif entropy_coef > 0:
        raise ValueError(
            "entropy_coef > 0 needs the exact per-token entropies (entropies=..., with grad): the "
            "sampled-token estimate -mean(log pi(a)) has zero expected gradient on-policy; use a policy "
            "with compute_logprobs_and_entropy or set entropy_coef 0"
        )
    else:
        entropy = -logprobs.detach().mean()
    loss = pg_loss - entropy_coef * entropy
    if ref_logprobs is not None and kl_coef > 0:
        kl = (w * low_var_kl(logprobs, ref_logprobs)).sum()
        loss = loss + kl_coef * kl
    elif ref_logprobs is not None:
        kl = (w * low_var_kl(logprobs, ref_logprobs)).sum()
    else:
        kl = torch.zeros((), dtype=logprobs.dtype)
    with torch.no_grad():
        clip_fraction = ((ratio - 1.0).abs() > clip_eps).float().mean()
        approx_kl_old = ((ratio - 1.0) - log_ratio).mean()
    return PolicyLoss(
        loss=loss * weight,
        pg_loss=pg_loss.detach(),
        kl=kl.detach(),
        entropy=entropy.detach(),
        clip_fraction=clip_fraction,
        approx_kl_old=approx_kl_old,
    )
