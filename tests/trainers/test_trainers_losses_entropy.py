"""The entropy bonus needs exact entropies: the sampled-token estimate has zero
expected gradient on-policy, so ppo_clip_loss refuses it instead of silently using it."""

from __future__ import annotations

import pytest
import torch

from trainers.loop.losses import ppo_clip_loss
from trainers.seeds import step as step_seed


def _policy(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(5, 7, generator=gen).requires_grad_(True)
    logp = torch.log_softmax(logits, -1)
    tokens = torch.multinomial(logp.exp().detach(), 1, generator=gen).squeeze(-1)
    return logits, logp, tokens


def test_entropy_bonus_without_exact_entropies_is_an_error():
    _, logp, tokens = _policy()
    lp = logp.gather(-1, tokens[:, None]).squeeze(-1)
    with pytest.raises(ValueError, match="zero expected gradient"):
        ppo_clip_loss(lp, lp.detach(), torch.zeros(5), entropy_coef=0.01)


def test_entropy_bonus_follows_the_gradient_of_the_exact_entropy():
    logits, logp, tokens = _policy()
    lp = logp.gather(-1, tokens[:, None]).squeeze(-1)
    ent = -(logp.exp() * logp).sum(-1)
    out = ppo_clip_loss(lp, lp.detach(), torch.zeros(5), entropy_coef=0.5, entropies=ent)
    (grad,) = torch.autograd.grad(out.loss, logits, retain_graph=True)
    (want,) = torch.autograd.grad(-0.5 * ent.mean(), logits)
    torch.testing.assert_close(grad, want)
    assert float(out.entropy) == pytest.approx(float(ent.detach().mean()))
    with pytest.raises(ValueError, match="entropies"):
        ppo_clip_loss(lp, lp.detach(), torch.zeros(5), entropy_coef=0.5, entropies=ent[:3])


def test_the_old_sampled_token_estimate_had_zero_expected_gradient():
    """Why the fallback went: E_{a~pi}[grad(-log pi(a))] = 0, while grad H(pi) is not."""
    logits, logp, _ = _policy(1)
    p = logp.exp().detach()
    expected = sum((p[:, a] * -logp[:, a]).sum() for a in range(7))  # sum_a pi(a) * -log pi(a), pi fixed
    (g_estimate,) = torch.autograd.grad(expected, logits, retain_graph=True)
    (g_entropy,) = torch.autograd.grad((-(logp.exp() * logp).sum(-1)).sum(), logits)
    assert g_estimate.abs().max() < 1e-6 < g_entropy.abs().max()


def test_without_the_bonus_the_entropy_is_a_detached_diagnostic():
    _, logp, tokens = _policy()
    lp = logp.gather(-1, tokens[:, None]).squeeze(-1)
    out = ppo_clip_loss(lp, lp.detach(), torch.zeros(5))
    assert float(out.entropy) == pytest.approx(float(-lp.detach().mean()))
    assert not out.entropy.requires_grad


def test_rollout_step_seeds_fit_torch_generators_for_any_run_seed():
    """Trainer seeds above ~1.8e8 used to overflow torch.Generator.manual_seed."""
    for run_seed in (0, 7, 2 * 10**8, 2**40, 2**64 + 5):
        s = step_seed(run_seed * 100_003 + 3, 12)
        assert 0 <= s < 2**63
        torch.Generator().manual_seed(s)
    assert step_seed(1, 2) == 1 * 1_000_003 + 2  # unchanged for ordinary seeds: old runs replay
