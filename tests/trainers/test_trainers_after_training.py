"""After training: evaluate a saved policy (python -m trainers.evaluate) and export it as a Hugging
Face model (python -m trainers.export), on real tiny runs of the rooms env."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from trainers.cli.train import main as train

FLAGS = (
    "--env rooms --model tiny --num-groups 2 --group-size 2 --max-steps 4 --iterations 2 "
    "--eval-episodes 8 --warm-start none --no-progress-bars --no-tensorboard --no-baseline-random "
    "--torch-threads 1"
).split()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("after")
    out = {"a": root / "a", "other_seed": root / "b", "lora": root / "lora"}
    assert train([*FLAGS, "--output-dir", str(out["a"])]) == 0
    assert train([*FLAGS, "--seed", "5", "--output-dir", str(out["other_seed"])]) == 0
    assert train([*FLAGS, "--lora", "--lr", "1e-3", "--output-dir", str(out["lora"])]) == 0
    return out


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_evaluate_replays_the_runs_own_final_evaluation(runs, tmp_path, capsys):
    from trainers.cli.evaluate import main

    assert (
        main([str(runs["a"]), "--episodes", "8", "--against", str(runs["a"]), "--json", str(tmp_path / "e.json")]) == 0
    )
    out = json.loads((tmp_path / "e.json").read_text())
    final = [r for r in _records(runs["a"]) if r.get("kind") == "eval"][-1]
    rec = out["evaluation"]
    assert rec["eval/panel"] == final["eval/panel"] and rec["eval/won"] == final["eval/won"]
    assert rec["eval/success"] == final["eval/success"] and rec["iteration"] == 2
    lo, hi = rec["eval/success_ci"]
    assert lo <= rec["eval/success"] <= hi and rec["eval/split"] == "valid"
    assert out["paired"]["diff"] == 0.0 and out["paired"]["ci"] == [0.0, 0.0]
    text = capsys.readouterr().out
    assert "success" in text and "paired difference (this - other) over the same 8 episodes: +0.000" in text


def test_evaluate_against_plays_the_same_split_episodes_and_streams(runs, tmp_path, capsys, monkeypatch):
    """``--against`` plays the other checkpoint on this evaluation's split (not its run's default)
    and episode count, with the same streams; the JSON holds both records and the paired
    difference, and the printed lines give each checkpoint's figures and the paired interval."""
    import trainers.rollouts.eval_episodes as evaluation
    from trainers.cli.evaluate import main
    from trainers.statistics import paired_bootstrap_ci

    streams: list[int] = []
    real_run_eval = evaluation.run_eval

    def spy(*args, **kwargs):
        streams.append(kwargs.get("streams"))
        return real_run_eval(*args, **kwargs)

    monkeypatch.setattr(evaluation, "run_eval", spy)
    other_policy = runs["lora"]  # the same seed, so the same panel: another policy on the same episodes
    assert (
        main(
            [
                str(runs["a"]),
                *"--split train --episodes 6 --against".split(),
                str(other_policy),
                *"--streams 2 --json".split(),
                str(tmp_path / "e.json"),
            ]
        )
        == 0
    )
    assert streams == [2, 2]
    out = json.loads((tmp_path / "e.json").read_text())
    assert sorted(out) == ["against", "evaluation", "paired"]
    rec, other = out["evaluation"], out["against"]
    assert (rec["eval/split"], other["eval/split"], rec["eval/episodes"], other["eval/episodes"]) == (
        "train",
        "train",
        6,
        6,
    )
    assert other["eval/panel"] == rec["eval/panel"] and (rec["iteration"], other["iteration"]) == (2, 2)
    assert other["checkpoint"].startswith(str(other_policy)) and rec["checkpoint"].startswith(str(runs["a"]))
    diff, lo, hi = paired_bootstrap_ci(other["eval/won"], rec["eval/won"], seed=0)
    assert out["paired"] == {
        "diff": diff,
        "ci": [lo, hi],
        "episodes": 6,
    }  # rooms scores are its outcomes: no score pair
    text = capsys.readouterr().out.splitlines()
    for r in (rec, other):
        r_lo, r_hi = r["eval/success_ci"]
        assert (
            f"{r['checkpoint']} (iteration {r['iteration']}) on rooms train, 6 episodes: success "
            f"{r['eval/success']:.3f} (95% CI [{r_lo:.3f}, {r_hi:.3f}])"
        ) in text
    assert (
        f"paired difference (this - other) over the same 6 episodes: {diff:+.3f} "
        f"(95% paired bootstrap CI [{lo:+.3f}, {hi:+.3f}])"
    ) in text
    assert text[-1] == f"-> {tmp_path / 'e.json'}"


def test_evaluate_without_json_prints_the_records_scalars_as_its_last_line(runs, tmp_path, capsys):
    from trainers.cli.evaluate import main

    assert main([str(runs["a"]), "--episodes", "4"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main([str(runs["a"]), "--episodes", "4", "--json", str(tmp_path / "e.json")]) == 0
    rec = json.loads((tmp_path / "e.json").read_text())["evaluation"]
    assert last == {k: v for k, v in rec.items() if not isinstance(v, list)}
    assert last["eval/episodes"] == 4 and "eval/won" not in last and "eval/panel" in last


def test_paired_differences_of_partial_scores_come_with_their_own_interval():
    """WebShop-like records (scores that are not the outcomes): the paired score difference is
    given beside the success one; records whose scores are their outcomes get none."""
    from trainers.cli.evaluate import _paired
    from trainers.statistics import paired_bootstrap_ci

    def record(won, score):
        return {"eval/panel": "p", "eval/won": won, "eval/score": score, "eval/task_id": ["t"] * len(won)}

    this = record([1, 0, 1, 0], [1.0, 0.5, 1.0, 0.25])
    other = record([0, 0, 1, 0], [0.25, 0.5, 1.0, 0.0])
    out = _paired(this, other)
    diff, lo, hi = paired_bootstrap_ci([0, 0, 1, 0], [1, 0, 1, 0], seed=0)
    assert (out["diff"], out["ci"], out["episodes"]) == (diff, [lo, hi], 4)
    sd, slo, shi = paired_bootstrap_ci([0.25, 0.5, 1.0, 0.0], [1.0, 0.5, 1.0, 0.25], seed=0)
    assert out["score"] == {"diff": sd, "ci": [slo, shi]} and sd == pytest.approx(0.25)
    assert "score" not in _paired(record([1, 0], [1.0, 0.0]), record([0, 0], [0.0, 0.0]))
    assert "score" in _paired(record([1, 0], [1.0, 0.0]), record([0, 0], [0.5, 0.0]))  # either side's partial scores


def test_evaluate_by_default_plays_the_runs_own_panel_with_both_intervals_at_seed_0(runs, tmp_path):
    """No --split or --episodes: the run's eval split and eval_episodes, the very panel of its
    last evaluation; the success and score intervals are the seed-0 bootstraps over episodes."""
    import numpy as np

    from trainers.cli.evaluate import main
    from trainers.statistics import paired_bootstrap_ci

    assert main([str(runs["a"]), "--json", str(tmp_path / "e.json")]) == 0
    rec = json.loads((tmp_path / "e.json").read_text())["evaluation"]
    final = [r for r in _records(runs["a"]) if r.get("kind") == "eval"][-1]
    assert (rec["eval/split"], rec["eval/episodes"], rec["eval/panel"]) == ("valid", 8, final["eval/panel"])
    for key, column in (("eval/success_ci", "eval/won"), ("eval/score_ci", "eval/score")):
        _, lo, hi = paired_bootstrap_ci(np.zeros(8), rec[column], seed=0)
        assert rec[key] == [lo, hi], key


def _webshop_like(won: list[int], score: list[float], checkpoint: str) -> dict:
    """An evaluation record with partial scores and task types, as WebShop's would be."""
    import numpy as np

    from trainers.statistics import paired_bootstrap_ci

    _, lo, hi = paired_bootstrap_ci(np.zeros(len(won)), won, seed=0)
    _, slo, shi = paired_bootstrap_ci(np.zeros(len(score)), score, seed=0)
    return {
        "checkpoint": checkpoint,
        "iteration": 3,
        "env": "webshop",
        "eval/split": "valid",
        "eval/episodes": len(won),
        "eval/panel": "p",
        "eval/won": won,
        "eval/score": score,
        "eval/task_id": ["t"] * len(won),
        "eval/success": float(np.mean(won)),
        "eval/score_mean": float(np.mean(score)),
        "eval/success_ci": [lo, hi],
        "eval/score_ci": [slo, shi],
        "eval/success_by_type/pick/and/place": 0.5,
        "eval/success_by_type/look": 0.25,
    }


def test_evaluate_prints_partial_scores_task_types_and_the_paired_interval_in_order(monkeypatch, capsys):
    """The printed lines of a WebShop-like pair of evaluations, checked against their own records."""
    import random

    import trainers.cli.evaluate as evaluate
    import trainers.saved_policy as saved_policy
    from trainers.statistics import paired_bootstrap_ci

    rng = random.Random(1)
    won = [[rng.random() < p for _ in range(40)] for p in (0.6, 0.3)]
    records = {
        name: _webshop_like([int(w) for w in ws], [1.0 if w else rng.choice([0.0, 0.25, 0.5]) for w in ws], name)
        for name, ws in zip(("this.pt", "other.pt"), won)
    }
    monkeypatch.setattr(saved_policy, "load_saved", lambda path: path)
    monkeypatch.setattr(evaluate, "evaluate_saved", lambda saved, split, episodes, streams: records[saved])
    assert evaluate.main(["this.pt", "--against", "other.pt"]) == 0
    lines = capsys.readouterr().out.splitlines()
    this, other = records["this.pt"], records["other.pt"]
    lo, hi = this["eval/score_ci"]
    assert lines[1] == f"  mean score {this['eval/score_mean']:.3f} (95% CI [{lo:.3f}, {hi:.3f}])"
    assert lines[2:4] == ["  look: 0.250", "  place: 0.500"]  # the type after the last "/", sorted by key
    diff, lo, hi = paired_bootstrap_ci(other["eval/won"], this["eval/won"], seed=0)
    assert lo < hi and lines[-2] == (
        f"paired difference (this - other) over the same 40 episodes: {diff:+.3f} "
        f"(95% paired bootstrap CI [{lo:+.3f}, {hi:+.3f}])"
    )
    paired = evaluate._paired(this, other)
    sd, slo, shi = paired_bootstrap_ci(other["eval/score"], this["eval/score"], seed=0)
    assert paired["ci"] == [lo, hi] and paired["score"] == {"diff": sd, "ci": [slo, shi]}
    assert json.loads(lines[-1])["eval/score_mean"] == this["eval/score_mean"]
    without_partial = {**this, "eval/score": this["eval/won"], "eval/score_mean": this["eval/success"]}
    assert not any("mean score" in ln for ln in evaluate._lines(without_partial))


@pytest.mark.parametrize("tool", ["evaluate", "export"])
def test_an_error_without_a_message_is_named_by_its_type(tool, monkeypatch, capsys, tmp_path):
    import importlib

    import trainers.saved_policy as saved_policy

    def refuse(path):
        raise ValueError()

    monkeypatch.setattr(saved_policy, "load_saved", refuse)
    module = importlib.import_module(f"trainers.{tool}")
    assert module.main(["run", *([str(tmp_path / "out")] if tool == "export" else [])]) == 2
    assert capsys.readouterr().err == "error: ValueError\n"


def _without_config(run: Path, into: Path) -> Path:
    """``run``'s last checkpoint saved again without its config, in ``into`` beside a copy of
    the run's ``config.yaml`` (a checkpoint written before checkpoints carried their config)."""
    import shutil

    from trainers.runs.checkpoint import load_checkpoint, save_checkpoint
    from trainers.saved_policy import resolve_checkpoint

    into.mkdir()
    shutil.copy(run / "config.yaml", into / "config.yaml")
    data = load_checkpoint(resolve_checkpoint(run))
    return save_checkpoint(into, 2, {k: v for k, v in data.items() if k not in ("config", "format", "iteration")})


def test_a_checkpoint_without_its_config_loads_with_its_run_dirs_config_yaml(runs, tmp_path):
    from trainers.saved_policy import load_saved

    bare = _without_config(runs["a"], tmp_path / "run")
    saved = load_saved(bare)
    assert saved.cfg.max_steps == 4 and saved.iteration == 2 and saved.checkpoint == bare
    ids = saved.policy.tokenizer("open the fridge", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(saved.model(ids).logits, load_saved(runs["a"]).model(ids).logits)


@pytest.mark.parametrize(
    "tool, said",
    [
        (
            "evaluate",
            [
                "usage: python -m trainers.evaluate",
                "Evaluate a saved policy on a split of its run's env, at fixed episode seeds.",
                "a run dir (its latest checkpoint) or a checkpoint file (iter_NNNNNN.pt)",
                "the env's split to play (default: the run's eval split)",
                "episodes (default: the run's eval_episodes)",
                "a second run dir or checkpoint, played on the same episodes: prints the paired difference (this - other)",
                "concurrent evaluation streams (CPU: processes)",
                "also write the JSON record to this file",
            ],
        ),
        (
            "export",
            [
                "usage: python -m trainers.export",
                "Export a saved policy as a Hugging Face model directory.",
                "a run dir (its latest checkpoint) or a checkpoint file (iter_NNNNNN.pt)",
                "the model directory to write (absent or empty)",
                "LoRA runs: merge the adapter into the base model",
            ],
        ),
    ],
)
def test_help_names_the_tool_and_says_what_every_argument_is(tool, said, capsys):
    import importlib

    with pytest.raises(SystemExit) as done:
        importlib.import_module(f"trainers.{tool}").main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for words in said:
        assert words in text, words


def test_evaluate_plays_a_single_episode(runs, tmp_path):
    from trainers.cli.evaluate import main

    assert main([str(runs["a"]), "--episodes", "1", "--json", str(tmp_path / "one.json")]) == 0
    assert json.loads((tmp_path / "one.json").read_text())["evaluation"]["eval/episodes"] >= 1


def test_evaluate_refuses_to_pair_checkpoints_on_different_episodes(runs, capsys):
    """Two runs of other seeds evaluate other panels at the same split and size: no paired interval."""
    from trainers.cli.evaluate import main

    assert main([str(runs["a"]), "--episodes", "8", "--against", str(runs["other_seed"])]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the two checkpoints' evaluations played different episodes") and "\n" not in err


@pytest.mark.parametrize(
    "argv,said",
    [
        (["/nonexistent/run"], "neither a run dir nor a checkpoint"),
        (["RUN", "--split", "hard"], "split"),
        (["RUN", "--episodes", "0"], "--episodes must be >= 1"),
        (["RUN", "--streams", "0"], "--streams must be >= 1"),
    ],
)
def test_evaluate_bad_input_is_one_line(runs, capsys, argv, said):
    from trainers.cli.evaluate import main

    assert main([str(runs["a"]) if a == "RUN" else a for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and said in err and "\n" not in err


def test_a_checkpoint_that_does_not_fit_its_model_is_one_line(runs, tmp_path, capsys):
    from trainers.cli.evaluate import main
    from trainers.runs.checkpoint import load_checkpoint, save_checkpoint
    from trainers.saved_policy import resolve_checkpoint as resolve

    config = load_checkpoint(resolve(runs["a"]))["config"]
    path = save_checkpoint(tmp_path, 1, {"config": {**config, "model": "tiny-128x2"}, "model": {"w": torch.zeros(2)}})
    assert main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not fit the model 'tiny-128x2'" in err and "\n" not in err


def test_a_saved_policy_loads_in_eval_mode_with_the_config_it_was_trained_with(runs, tmp_path):
    from trainers.runs.checkpoint import load_checkpoint
    from trainers.saved_policy import load_saved, resolve_checkpoint, saved_config

    saved = load_saved(runs["a"])
    assert not saved.model.training and saved.iteration == 2  # no dropout at evaluation or export
    data = load_checkpoint(resolve_checkpoint(runs["a"]))
    assert data["config"]["batch_decisions"] != "off"  # the run's own value, not the earlier default, is read
    assert saved_config(data, resolve_checkpoint(runs["a"])).batch_decisions == data["config"]["batch_decisions"]
    older = {k: v for k, v in data["config"].items() if k != "batch_decisions"}  # written before the field existed
    assert saved_config({**data, "config": older}, resolve_checkpoint(runs["a"])).batch_decisions == "off"
    # a checkpoint without its config is read with its run dir's config.yaml
    bare = _without_config(runs["a"], tmp_path / "run")
    assert saved_config(load_checkpoint(bare), bare).max_steps == 4
    (tmp_path / "run" / "config.yaml").unlink()
    with pytest.raises(Exception, match="carries no config and .*config.yaml does not exist"):
        saved_config(load_checkpoint(bare), bare)


def _logits(model, ids):
    with torch.no_grad():
        return model(ids).logits


def test_export_gives_a_transformers_model_with_the_policys_logits(runs, tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainers.cli.export import main
    from trainers.saved_policy import load_saved

    out = tmp_path / "exported"
    assert main([str(runs["a"]), str(out)]) == 0
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json", "progpo_export.json"} <= {
        p.name for p in out.iterdir()
    }
    model, tok = AutoModelForCausalLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    ids = tok("go to the kitchen and look", return_tensors="pt").input_ids
    assert torch.equal(_logits(model, ids), _logits(load_saved(runs["a"]).model, ids))
    meta = json.loads((out / "progpo_export.json").read_text())
    assert meta["iteration"] == 2 and meta["weights"] == "full model" and meta["prompt"]["env"] == "rooms"
    assert main([str(runs["a"]), str(out)]) == 2  # a non-empty OUT_DIR is never overwritten
    assert "not an empty directory" in capsys.readouterr().err
    assert main([str(runs["a"]), str(tmp_path / "m"), "--merge"]) == 2
    assert "--merge applies to LoRA runs" in capsys.readouterr().err


def test_the_export_manifest_names_its_run_and_the_prompt_the_policy_was_trained_with(runs, tmp_path, capsys):
    """``progpo_export.json`` in full, for a full model and for a LoRA adapter (whose tiny base is
    written beside it) and its merge; OUT_DIR may be nested or an empty dir, never a file."""
    from trainers.cli.export import PROMPT_FIELDS, main
    from trainers.runs.checkpoint import load_checkpoint
    from trainers.saved_policy import resolve_checkpoint

    def expected(run, weights, base):
        ckpt = resolve_checkpoint(run)
        cfg = load_checkpoint(ckpt)["config"]
        return {
            "format": "progpo-export-v1",
            "checkpoint": str(ckpt),
            "iteration": 2,
            "model": cfg["model"],
            "weights": weights,
            "prompt": {k: cfg[k] for k in PROMPT_FIELDS},
            "estimator": cfg["estimator"],
            "base": base,
        }

    nested = tmp_path / "a" / "b" / "full"
    assert main([str(runs["a"]), str(nested)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"-> {nested}: transformers.AutoModelForCausalLM.from_pretrained({str(nested)!r})"
    )
    assert json.loads((nested / "progpo_export.json").read_text()) == expected(runs["a"], "full model", "tiny")
    (tmp_path / "empty").mkdir()
    assert main([str(runs["lora"]), str(tmp_path / "empty")]) == 0
    assert json.loads((tmp_path / "empty" / "progpo_export.json").read_text()) == expected(
        runs["lora"], "peft adapter", "base"
    )
    assert main([str(runs["lora"]), str(tmp_path / "merged"), "--merge"]) == 0
    assert json.loads((tmp_path / "merged" / "progpo_export.json").read_text()) == expected(
        runs["lora"], "full model", "tiny"
    )
    assert not (tmp_path / "merged" / "base").exists()  # a merged model needs no base
    capsys.readouterr()
    (tmp_path / "file").write_text("x")
    assert main([str(runs["a"]), str(tmp_path / "file")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "is not an empty directory" in err and (tmp_path / "file").read_text() == "x"


def test_an_adapter_whose_base_loads_by_name_is_written_without_it(runs, tmp_path, monkeypatch):
    """A base another process can load (a local dir or a hub name) is named, not copied."""
    import trainers.cli.export as export
    from trainers.saved_policy import load_saved

    assert export._loadable_by_name(str(tmp_path)) and export._loadable_by_name("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert not export._loadable_by_name("tiny") and not export._loadable_by_name(str(tmp_path / "absent"))
    saved = load_saved(runs["lora"])
    monkeypatch.setattr(export, "_loadable_by_name", lambda model: model == "tiny")
    export.export_saved(saved, tmp_path / "adapter")
    assert not (tmp_path / "adapter" / "base").exists()
    assert json.loads((tmp_path / "adapter" / "progpo_export.json").read_text())["base"] == "tiny"


def test_load_saved_takes_the_device_and_overrides_it_is_given(runs, tmp_path, capsys):
    from trainers.cli.evaluate import main
    from trainers.runs.checkpoint import load_checkpoint, save_checkpoint
    from trainers.saved_policy import load_saved, resolve_checkpoint

    data = load_checkpoint(resolve_checkpoint(runs["a"]))
    assert data["config"]["device"] != "cpu"  # the run's own setting ("auto"), replaced below
    saved = load_saved(runs["a"], output_dir=str(tmp_path / "elsewhere"), max_steps=2)
    assert (saved.cfg.device, saved.cfg.output_dir, saved.cfg.max_steps) == ("cpu", str(tmp_path / "elsewhere"), 2)
    assert saved.cfg.seed == data["config"]["seed"] and saved.cfg.env == "rooms"
    no_weights = save_checkpoint(
        tmp_path, 2, {k: v for k, v in data.items() if k not in ("model", "format", "iteration")}
    )
    assert main([str(no_weights)]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no valid 'model'" in err and "\n" not in err


def test_a_lora_run_exports_its_adapter_or_the_merged_model(runs, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainers.cli.export import main
    from trainers.saved_policy import load_saved

    saved = load_saved(runs["lora"])
    tok = saved.policy.tokenizer
    ids = tok("open the fridge", return_tensors="pt").input_ids
    trained = _logits(saved.model, ids)
    assert main([str(runs["lora"]), str(tmp_path / "adapter")]) == 0
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    from peft import PeftModel

    base = AutoModelForCausalLM.from_pretrained(tmp_path / "adapter" / "base")  # a tiny base: written beside it
    adapter = PeftModel.from_pretrained(base, tmp_path / "adapter")
    assert torch.allclose(_logits(adapter, ids), trained, atol=1e-5)
    assert json.loads((tmp_path / "adapter" / "progpo_export.json").read_text())["weights"] == "peft adapter"
    assert main([str(runs["lora"]), str(tmp_path / "merged"), "--merge"]) == 0
    assert json.loads((tmp_path / "merged" / "progpo_export.json").read_text())["weights"] == "full model"
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    assert torch.allclose(_logits(merged, ids), trained, atol=1e-5)
    assert AutoTokenizer.from_pretrained(tmp_path / "merged") is not None


def test_play_shows_an_episode_as_the_agent_lived_it(runs, tmp_path, capsys):
    from trainers.cli.evaluate import main as evaluate
    from trainers.cli.play import main as play

    assert evaluate([str(runs["a"]), "--episodes", "8", "--json", str(tmp_path / "e.json")]) == 0
    task_ids = json.loads((tmp_path / "e.json").read_text())["evaluation"]["eval/task_id"]
    capsys.readouterr()
    page = tmp_path / "ep.html"
    assert play([str(runs["a"]), "--task", "1", "--episodes", "8", "--top", "2", "--html", str(page)]) == 0
    text = capsys.readouterr().out
    assert "episode 1" in text and "--- step 0 ---" in text and "--- end ---" in text
    probs = [float(ln.split("%")[0]) for ln in text.splitlines() if ln.startswith("   ") and "%" in ln]
    assert probs and all(0.0 <= p <= 100.0 for p in probs)
    actions = [ln for ln in text.splitlines() if ln.startswith("> ")]
    assert actions and all("reward" in a and "coverage" in a for a in actions)
    assert text.strip().splitlines()[-2].startswith(("won: outcome", "lost: outcome"))  # then the page line
    html_text = page.read_text()
    assert html_text.startswith("<!doctype html>") and "<script" not in html_text and html_text.count("<section>") >= 2
    assert f"(task {task_ids[1]}," in text  # the panel's episode 1: its task, as the evaluation played it


def test_play_of_an_episode_outside_the_panel_is_one_line(runs, capsys):
    from trainers.cli.play import main as play

    assert play([str(runs["a"]), "--task", "99", "--episodes", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --task must be in 0..7") and "\n" not in err


def test_the_report_shows_a_won_and_a_lost_episode_of_each_evaluation(runs):
    evals = [r for r in _records(runs["a"]) if r.get("kind") == "eval"]
    for r in evals:
        kinds = set(r["eval/examples"])
        assert kinds == {k for k, w in (("won", 1), ("lost", 0)) if w in r["eval/won"]}
        for kind, ex in r["eval/examples"].items():
            assert r["eval/won"][ex["episode"]] == (kind == "won") and ex["actions"]
    summary = (runs["a"] / "summary.md").read_text()
    assert "What the agent did" in summary and summary.count("iteration 0, valid episode") >= 1


@pytest.mark.slow
def test_a_smollm2_lora_run_exports_merged_weights_with_its_logits(tmp_path):
    """The bundled SmolLM2-135M-Instruct, one LoRA iteration: the merged export loads in
    transformers and gives the trained policy's logits."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainers.cli.export import main as export
    from trainers.saved_policy import load_saved

    run = tmp_path / "run"
    assert (
        train(
            [
                *(
                    "--env rooms --model smollm2 --lora --lr 1e-3 --iterations 1 --num-groups 1 --group-size 2 "
                    "--max-steps 2 --eval-episodes 0 --warm-start none --no-progress-bars --no-tensorboard "
                    "--no-baseline-random --torch-threads 2 --output-dir"
                ).split(),
                str(run),
            ]
        )
        == 0
    )
    assert export([str(run), str(tmp_path / "merged"), "--merge"]) == 0
    saved = load_saved(run)
    ids = saved.policy.tokenizer("You are in the hall. Exits: kitchen.", return_tensors="pt").input_ids
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    assert torch.allclose(_logits(merged, ids), _logits(saved.model, ids), atol=1e-4)
    assert AutoTokenizer.from_pretrained(tmp_path / "merged")("hi").input_ids == saved.policy.tokenizer("hi").input_ids


def test_the_transcript_of_a_scripted_episode():
    """A scripted policy (the first admissible command after look/inventory) on one rooms episode:
    the transcript shows each observation, the command, its reward and coverage, then the end."""
    from agents.contract import StepOutput
    from trainers import seeds
    from trainers.cli.play import episode_steps, render_html, render_text
    from trainers.envs import make_env_fn
    from trainers.rollouts.eval_episodes import EvalPlan, play_episodes

    class Scripted:
        def act(self, observations, infos, histories=None, *, seed=None):
            cmds = [sorted(c for c in i["admissible_commands"] if c not in ("look", "inventory")) for i in infos]
            return [StepOutput(action=c[0]) for c in cmds]

    fn = make_env_fn("rooms", "valid", 4)
    plan = EvalPlan.for_env(fn, "valid", 4, seed=seeds.eval_plan(0))
    rollout = play_episodes(Scripted(), fn, plan, [2])
    steps = episode_steps(rollout)
    assert [s["t"] for s in steps] == list(range(len(steps))) and steps and all(s["candidates"] == [] for s in steps)
    coverage = 0
    for s in steps:
        coverage += s["first_visit"]
        assert s["coverage"] == coverage and s["answer"] == ""
    text = render_text("rooms valid, episode 2", steps, "lost: outcome 0.000")
    acted = [ln for ln in text.splitlines() if ln.startswith("> ")]
    assert [ln.split("    ")[0][2:] for ln in acted] == [s["action"] for s in steps]
    assert text.splitlines()[0] == "rooms valid, episode 2" and text.rstrip().endswith("lost: outcome 0.000")
    assert steps[0]["observation"].strip() in text and "--- end ---" in text
    page = render_html("ep <2>", steps, "lost & done")
    assert "ep &lt;2&gt;" in page and "lost &amp; done" in page and page.count("<section>") == len(steps) + 1


def test_export_leaves_the_policy_it_is_given_as_it_was_and_the_adapter_loads_offline_by_itself(runs, tmp_path, capsys):
    """Exporting a LoRA policy (adapter with its base beside it, or merged) works on a copy: a
    script that exports and then keeps evaluating still has the trained policy, LoRA layers and
    all. The adapter's config names its base, so ``AutoPeftModelForCausalLM`` loads it offline,
    and the line the command prints is that call."""
    from peft import AutoPeftModelForCausalLM

    from trainers.cli.export import export_saved, main
    from trainers.saved_policy import load_saved

    saved = load_saved(runs["lora"])
    ids = saved.policy.tokenizer("open the fridge", return_tensors="pt").input_ids
    trained = _logits(saved.model, ids)
    for name, merge in (("adapter", False), ("merged", True)):
        export_saved(saved, tmp_path / name, merge=merge)
        assert torch.equal(_logits(saved.model, ids), trained), name  # not the base model's logits
        assert saved.model.peft_config["default"].base_model_name_or_path != str(tmp_path / "adapter" / "base")
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(tmp_path / "adapter" / "base")
    loaded = AutoPeftModelForCausalLM.from_pretrained(tmp_path / "adapter")
    assert torch.allclose(_logits(loaded, ids), trained, atol=1e-5)
    assert main([str(runs["lora"]), str(tmp_path / "again")]) == 0
    line = capsys.readouterr().out.strip()
    assert (
        line == f"-> {tmp_path / 'again'}: peft.AutoPeftModelForCausalLM.from_pretrained({str(tmp_path / 'again')!r})"
    )


@pytest.mark.parametrize(
    "where, said",
    [
        ("under_file", "is a file, not a folder"),
        ("dangling", "is a link (dangling)"),
        ("read_only", "is not writable"),
    ],
)
def test_export_checks_its_path_before_reading_the_checkpoint(runs, tmp_path, capsys, monkeypatch, where, said):
    import os

    import trainers.saved_policy as saved_policy
    from trainers.cli.export import main

    monkeypatch.setattr(saved_policy, "load_saved", lambda *a, **k: pytest.fail("the checkpoint was read first"))
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    (tmp_path / "ro").mkdir()
    target = {
        "under_file": tmp_path / "file" / "out",
        "dangling": tmp_path / "link",
        "read_only": tmp_path / "ro" / "out",
    }[where]
    if where == "read_only":
        if os.geteuid() == 0:
            monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(tmp_path / "ro"))
        else:
            (tmp_path / "ro").chmod(0o500)
    assert main([str(runs["lora"]), str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and said in err and "\n" not in err


def test_an_export_that_fails_midway_leaves_nothing_and_the_retry_succeeds(runs, tmp_path, monkeypatch, capsys):
    """A full disk while the weights are written: nothing is left at OUT_DIR or beside it, and the
    same command then succeeds."""
    import trainers.cli.export as export

    real = export._write

    def full_disk(*a, **k):
        real(*a, **k)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "_write", full_disk)
    assert export.main([str(runs["a"]), str(tmp_path / "out")]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    monkeypatch.setattr(export, "_write", real)
    assert export.main([str(runs["a"]), str(tmp_path / "out")]) == 0


def test_evaluate_defaults_to_the_runs_own_eval_streams_and_reproduces_its_last_evaluation(tmp_path, capsys):
    from trainers.cli.evaluate import main

    run = tmp_path / "streams2"
    assert train([*FLAGS, "--eval-streams", "2", "--output-dir", str(run)]) == 0
    final = [r for r in _records(run) if r.get("kind") == "eval"][-1]
    assert main([str(run), "--json", str(tmp_path / "e.json")]) == 0
    rec = json.loads((tmp_path / "e.json").read_text())["evaluation"]
    assert (rec["eval/won"], rec["eval/success"]) == (final["eval/won"], final["eval/success"])


@pytest.mark.parametrize("tool", ["evaluate", "play"])
@pytest.mark.parametrize(
    "where, said",
    [("folder", "is a folder; name a file"), ("missing", "does not exist"), ("under_file", "is a file, not a folder")],
)
def test_an_output_file_is_checked_before_the_episodes_play(runs, tmp_path, capsys, monkeypatch, tool, where, said):
    import importlib

    import trainers.rollouts.eval_episodes as evaluation

    monkeypatch.setattr(evaluation, "run_eval", lambda *a, **k: pytest.fail("played before the path was checked"))
    monkeypatch.setattr(evaluation, "play_episodes", lambda *a, **k: pytest.fail("played before the path was checked"))
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    target = {"folder": tmp_path / "dir", "missing": tmp_path / "no" / "e.json", "under_file": tmp_path / "file" / "e"}[
        where
    ]
    flag = "--json" if tool == "evaluate" else "--html"
    assert importlib.import_module(f"trainers.{tool}").main([str(runs["a"]), flag, str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {flag} ") and said in err and "\n" not in err


@pytest.mark.parametrize("tool", ["evaluate", "play", "export"])
def test_a_run_dir_without_a_checkpoint_says_so_not_the_trainers_resume_advice(tool, tmp_path, capsys):
    import importlib

    (tmp_path / "run").mkdir()
    argv = [str(tmp_path / "run")] + ([str(tmp_path / "out")] if tool == "export" else [])
    assert importlib.import_module(f"trainers.{tool}").main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "has no checkpoint (no checkpoints/latest)" in err and "--resume" not in err


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--episodes", "-4"], "--episodes must be >= 1, got -4"),
        (["--episodes", "0"], "--episodes must be >= 1, got 0"),
        (["--top", "0"], "--top must be >= 1, got 0"),
        (["--top", "-1"], "--top must be >= 1, got -1"),
        (["--task", "-1"], "--task must be >= 0, got -1"),
    ],
)
def test_play_refuses_sizes_below_one_in_one_line(runs, capsys, argv, said):
    from trainers.cli.play import main as play

    assert play([str(runs["a"]), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {said}"


def test_an_export_carries_a_model_card_that_huggingface_hub_reads(runs, tmp_path):
    """``README.md`` beside the weights: ``ModelCard.load`` parses its header, and its text names
    the base, the method, the env and splits, the last evaluation with its interval, the commit
    and how to load it."""
    from huggingface_hub import ModelCard

    from trainers.cli.export import main
    from trainers.model_card import last_evaluation

    for run, name in ((runs["a"], "full"), (runs["lora"], "adapter")):
        assert main([str(run), str(tmp_path / name)]) == 0
        card = ModelCard.load(tmp_path / name / "README.md")
        data = card.data.to_dict()
        assert "progpo" in data["tags"] and data["library_name"] == ("peft" if name == "adapter" else "transformers")
        last = last_evaluation(_records(run))
        assert f"held-out success {last['success']:.3f} (95% bootstrap interval [{last['lo']:.3f}, " in card.text
        assert "estimator: `progpo-gigpo`" in card.text and "env: `rooms`" in card.text
        assert (
            "AutoPeftModelForCausalLM" if name == "adapter" else "AutoModelForCausalLM.from_pretrained"
        ) in card.text
    assert data["base_model"] == str(tmp_path / "adapter" / "base")


def test_a_privileged_teacher_is_named_so_in_the_card():
    from trainers.model_card import model_card

    text = model_card(
        {"model": "tiny", "estimator": "gigpo", "distill": "privileged", "env": "alfworld"},
        "full model",
        None,
        "/x",
        None,
    )
    assert "privileged-teacher" in text and "**privileged**" in text and "not pure RL" in text


def test_a_checkpoint_older_than_its_runs_records_gets_its_own_evaluation_on_its_card(runs, tmp_path, capsys):
    """The run went on past the checkpoint (a later evaluation in its metrics.jsonl, no later
    checkpoint): the export's card reports the checkpoint's last evaluation, not the run's."""
    import shutil

    from trainers.cli.export import main
    from trainers.runs.checkpoint import load_checkpoint
    from trainers.saved_policy import resolve_checkpoint

    run = tmp_path / "run"
    shutil.copytree(runs["a"], run)
    later = {"iteration": 3, "kind": "eval", "eval/split": "valid", "eval/episodes": 8, "eval/success": 0.999}
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write(json.dumps({"iteration": 3, "kind": "train", "loss": 0.1}) + "\n" + json.dumps(later) + "\n")
    assert main([str(run), str(tmp_path / "out")]) == 0
    card = (tmp_path / "out" / "README.md").read_text()
    own = [r for r in load_checkpoint(resolve_checkpoint(run))["history"] if r.get("kind") == "eval"][-1]
    assert own["iteration"] == 2 and "0.999" not in card and "iteration 3" not in card
    assert f"Last evaluation: held-out success {own['eval/success']:.3f} (95% bootstrap interval [" in card
    assert "on 8 episodes of `valid` at iteration 2.\n" in card
    capsys.readouterr()
