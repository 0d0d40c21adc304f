"""The verl plugin's import hook can never break the module it patches, and loads beside a foreign
``agents`` package. Run against a small stand-in ``verl`` package on ``sys.path`` (in a fresh
interpreter), so it runs where verl is not installed; the real verl is in test_verl_real.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _stand_in_verl(root: Path, ray_trainer: str) -> None:
    ppo = root / "verl" / "trainer" / "ppo"
    ppo.mkdir(parents=True)
    for d in (root / "verl", root / "verl" / "trainer", ppo):
        (d / "__init__.py").write_text("")
    (ppo / "ray_trainer.py").write_text(ray_trainer)


def _run(cwd: Path, code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd), str(REPO)]), PYTHONWARNINGS="default")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_a_failing_patch_warns_and_leaves_the_module_importable(tmp_path):
    # a ray_trainer without compute_advantage: the legacy patch fails (AttributeError)
    _stand_in_verl(tmp_path, "VERL_OWN = 42\n")
    out = _run(
        tmp_path,
        "import trainers.integrations.verl_plugin as p; import verl.trainer.ppo.ray_trainer as m; "
        "print(m.VERL_OWN, p.patched_modules())",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "42 {}"
    assert (
        "RuntimeWarning: progpo's verl plugin could not patch verl.trainer.ppo.ray_trainer (AttributeError"
        in out.stderr
    )


def test_the_plugin_loads_beside_a_foreign_agents_package(tmp_path):
    _stand_in_verl(
        tmp_path,
        "def compute_advantage(data, adv_estimator, *a, **k):\n    return 'verl'\n"
        "def compute_response_mask(data):\n    return None\n",
    )
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "__init__.py").write_text("WHOSE = 'the user'\n")
    out = _run(
        tmp_path,
        "import agents, trainers.integrations.verl_plugin as p; import verl.trainer.ppo.ray_trainer; "
        "print(agents.WHOSE, '|', p.patched_modules()['verl.trainer.ppo.ray_trainer'])",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("the user | compute_advantage passes non_tensor_batch to progpo_")
