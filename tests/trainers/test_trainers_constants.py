"""ProGPO's thresholds have one definition (``wrappers.signals``): every default that names them,
in the trainer's config, the estimators, the metrics, the statistics and the integrations, is
that constant, and the constant holds the paper's value."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest

from wrappers.signals import TAU_P, TAU_R

MODULES = (
    "trainers.advantages",
    "trainers.config",
    "trainers.runs.metrics",
    "trainers.statistics",
    "trainers.integrations.trl",
    "wrappers.group",
    "wrappers.signals",
)


def test_the_thresholds_hold_the_papers_values():
    assert TAU_R == 1e-3 and TAU_P == 1e-4  # DESIGN.md: all outcomes < tau_R = 1e-3; std P >= tau_P (1e-4)


def _defaults(module_name: str):
    module = importlib.import_module(module_name)
    for name, obj in vars(module).items():
        if getattr(obj, "__module__", "").split(".")[0] != module_name.split(".")[0]:
            continue
        if dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                if f.name in ("tau_r", "tau_p") and f.default is not dataclasses.MISSING:  # a required field has none
                    yield f"{module_name}.{name}.{f.name}", f.name, f.default
        candidates = (
            [obj]
            if inspect.isfunction(obj)
            else [m for m in vars(obj).values() if inspect.isfunction(m)]
            if inspect.isclass(obj)
            else []
        )
        for fn in candidates:
            for p in inspect.signature(fn).parameters.values():
                if p.name in ("tau_r", "tau_p") and p.default is not inspect.Parameter.empty:
                    yield f"{module_name}.{fn.__qualname__}({p.name})", p.name, p.default


@pytest.mark.parametrize("module_name", MODULES)
def test_every_default_threshold_is_the_one_constant(module_name):
    found = list(_defaults(module_name))
    for where, name, default in found:
        assert default == {"tau_r": TAU_R, "tau_p": TAU_P}[name], where
    if module_name != "wrappers.signals":
        assert found, f"{module_name} names no threshold default any more: drop it from MODULES"


def test_the_trainers_config_and_its_estimator_take_the_constants():
    from trainers.config import TrainConfig

    cfg = TrainConfig()
    assert (cfg.tau_r, cfg.tau_p) == (TAU_R, TAU_P)
    adv = cfg.advantage_config()
    assert (adv.tau_r, adv.tau_p) == (TAU_R, TAU_P)
