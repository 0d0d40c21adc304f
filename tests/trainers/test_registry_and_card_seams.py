"""The seams where a one-line bug changed what the package does and no test saw it: a plug-in
option that shares a config field's name, which teachers are privileged, aliases inside a list,
and the model card's interval written as a reader reads it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from trainers.advantages import AdvantageConfig
from trainers.advantages.registry import option, register_estimator, unregister
from trainers.model_card import model_card
from trainers.strict_yaml import StrictYAMLError, load_strict
from trainers.teachers.registry import distill_label, reads_privileged


@dataclass(frozen=True)
class GammaOptions:
    gamma: float = option(0.5, "a plug-in's own discount, not the run's", ge=0, le=1)


@pytest.fixture()
def gamma_plugin():
    @register_estimator("own-gamma", options=GammaOptions, help="reads its own gamma", replace=True)
    def _term(ctx):
        return np.full(ctx.traj.size, ctx.options.gamma)

    yield
    unregister("own-gamma")


def test_a_plugin_option_named_like_a_run_field_keeps_its_own_default(gamma_plugin):
    cfg = AdvantageConfig(estimator="own-gamma", gamma=0.95)  # the run's discount
    assert cfg.base_options.gamma == 0.5  # the plug-in's own option is not the run's field
    assert AdvantageConfig(estimator="own-gamma", gamma=0.95, options={"gamma": 0.25}).base_options.gamma == 0.25


def test_a_shared_option_does_take_the_runs_value():
    assert AdvantageConfig(estimator="gigpo", omega=0.3).base_options.omega == 0.3  # GiGPO's omega is shared


def test_only_the_privileged_teacher_is_privileged_and_only_its_runs_read_privileged_text(monkeypatch):
    from trainers import build
    from trainers.config import TrainConfig

    assert reads_privileged("privileged") and not reads_privileged("hindsight") and not reads_privileged("none")
    assert distill_label("hindsight") == "hindsight (no ground truth)"
    built = []
    monkeypatch.setattr(build, "make_env_fn", lambda *a, **kw: built.append((a[1], kw)) or (lambda: None))
    for distill, reads in (("hindsight", False), ("privileged", True), ("none", False)):
        built.clear()
        build.env_fns(TrainConfig(env="alfworld", distill=distill, estimator="gigpo"))
        train_kw, eval_kw = built[0][1], built[1][1]
        assert train_kw.get("privileged_info", False) is reads, distill
        assert "privileged_info" not in eval_kw  # the held-out envs never offer it


@pytest.mark.parametrize("distill, tagged", [("hindsight", False), ("privileged", True), ("none", False)])
def test_the_card_tags_privileged_runs_only(distill, tagged):
    cfg = {"model": "tiny", "estimator": "gigpo", "distill": distill, "env": "alfworld"}
    card = model_card(cfg, "full model", None, "/tmp/out", None)
    assert ("privileged-teacher" in card) is tagged and ("**privileged**" in card) is tagged


def test_the_cards_evaluation_reads_success_then_its_interval_low_to_high():
    evaluation = {"iteration": 2, "split": "easy-valid", "episodes": 144, "success": 0.25, "lo": 0.181, "hi": 0.319}
    card = model_card({"model": "tiny", "env": "alfworld"}, "full model", evaluation, "/tmp/out", "abc1234")
    assert (
        "Last evaluation: held-out success 0.250 (95% bootstrap interval [0.181, 0.319] over its episodes) on 144 "
        "episodes of `easy-valid` at iteration 2." in card
    )
    assert "code: commit `abc1234`" in card


@pytest.mark.parametrize(
    "text",
    [
        "x: &x 1\nb: [*x, *x]\n",
        "x: &x [1, 2]\nb:\n  - *x\n  - *x\n",
        "a: &a [1]\nb: &b [*a, *a]\nc: [*b, *b]\n",  # the "billion laughs" shape
        "x: &x {k: 1}\nb: [{y: *x}]\n",
    ],
)
def test_aliases_inside_a_list_are_refused_like_those_in_a_mapping(text):
    with pytest.raises(StrictYAMLError, match="YAML aliases"):
        load_strict(text)


def test_a_base_estimators_report_paragraph_is_given_the_options_the_run_trained_with(tmp_path):
    """The report's paragraph reads the options as used: ``estimator_options`` over the flat
    fields (HGPO's depth 3 given as an option, its flat field at the default 2), and PlanPO's turn
    term, on in its options, said to be off because score mode's schedule turned it off."""
    from trainers.config import TrainConfig
    from trainers.runs.summary import write_report

    train = [
        {
            "iteration": i,
            "kind": "train",
            "adv/groups": 4.0,
            "adv/hgpo_peer_step_frac": 0.5,
            "adv/hgpo_deep_step_frac": 0.25,
            "adv/planpo_groups": 1.0,
            "adv/planpo_turn_alpha": 0.0,
        }
        for i in (1, 2)
    ]
    hgpo = {
        **TrainConfig().to_dict(),
        "estimator": "hgpo",
        "estimator_options": {"depth": 3, "fusion": "inverse-variance"},
    }
    text = write_report(tmp_path / "h", train, hgpo).read_text()
    assert "(depths 1..3, inverse-variance fusion)." in text and "On average 50.0% of the steps" in text
    planpo = {**TrainConfig().to_dict(), "estimator": "planpo", "policy_mode": "score"}
    text = write_report(tmp_path / "p", train, planpo).read_text()
    assert "acted in **2 of 8 groups** (25.0%)" in text and "in score mode a response is a command's name" in text
    off = {**planpo, "estimator_options": {"alpha_start": 0.0, "alpha_end": 0.0}}
    text = write_report(tmp_path / "o", train, off).read_text()
    assert "The turn term was off (alpha 0)." in text and "in score mode" not in text
