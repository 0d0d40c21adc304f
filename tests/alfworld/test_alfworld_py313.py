"""The stock engine on Python 3.13 (textworld's EvalSymbol.derive relied on the
pre-3.13 ``locals()``). The replacement must give the stock transcripts on every Python."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture()
def game_file(alfworld_engine) -> str:
    from progpo_envs.alfworld.embedded import embedded_root

    return str(sorted((embedded_root() / "json_2.1.1" / "easy-valid").glob("*/*/game.tw-pddl"))[0])


def _transcript(game_file: str) -> list:
    from progpo_envs.alfworld.engine import StockEngine

    eng = StockEngine()
    eng.load(game_file)
    out = [eng.reset(), eng.admissible_commands]
    for cmd in eng.admissible_commands[:3] + ["jump"]:
        out += [eng.step(cmd), eng.admissible_commands, eng.won]
        eng.reset()
    eng.close()
    return out


def test_explicit_variable_eval_gives_the_stock_transcript(game_file: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import textworld.envs.pddl.textgen as tg

    from progpo_envs.alfworld import engine

    reference = _transcript(game_file)  # stock derive before 3.13, the replacement on 3.13+
    calls = []
    replacement = engine._eval_symbol_derive

    def counted(self, context=None):
        calls.append(self.expression)
        return replacement(self, context)

    monkeypatch.setattr(tg.EvalSymbol, "derive", counted)
    monkeypatch.setattr(engine, "_eval_symbol_derive", counted)  # keep it installed on 3.13 too
    assert _transcript(game_file) == reference
    assert calls, "the grammar evaluated no {expression}: the test would prove nothing"


@pytest.mark.skipif(sys.version_info < (3, 13), reason="the stock derive is left alone before 3.13")
def test_stock_engine_runs_on_313(game_file: str) -> None:
    import textworld.envs.pddl.textgen as tg

    from progpo_envs.alfworld import engine

    _transcript(game_file)
    assert tg.EvalSymbol.derive is engine._eval_symbol_derive
