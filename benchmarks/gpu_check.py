"""The GPU check's measurements and report (driven by ``benchmarks/gpu_check.sh``).

    python benchmarks/gpu_check.py preflight --device cuda --json OUT/preflight.json
    python benchmarks/gpu_check.py iteration RUN_DIR --json OUT/iteration.json
    python benchmarks/gpu_check.py fsdp PLAIN_DIR FSDP_DIR --model M --json OUT/fsdp.json
    python benchmarks/gpu_check.py short RUN_DIR --json OUT/short.json
    python benchmarks/gpu_check.py report OUT                  # OUT/gpu_check.json + the table

Each subcommand reads what the trainer wrote (``metrics.jsonl``, checkpoints) and writes one
JSON; ``report`` merges them and prints one table. Nothing here needs a network.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: verl-agent's published seconds per training iteration of GiGPO on ALFWorld (Qwen2.5-1.5B-Instruct)
PUBLISHED_S = {"verl-agent, 2 GPUs": 363.0, "verl-agent, 4 GPUs": 454.0}
PAPER_STEPS = 50  # ALFWorld's step limit: a paper iteration plays episodes of up to 50 steps


def _write(path: str | None, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=1, default=str)
    print(text)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)


def _train_record(run_dir: str) -> dict[str, Any]:
    rows = [json.loads(line) for line in open(Path(run_dir) / "metrics.jsonl")]
    train = [r for r in rows if r.get("kind") == "train"]
    if not train:
        raise SystemExit(f"{run_dir}: no train record in metrics.jsonl")
    return train[-1]


def matmul_tflops(device: str, n: int, dtype: Any, reps: int = 10) -> float:
    import torch

    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    (a @ b).sum().item()
    t0 = time.perf_counter()
    for _ in range(reps):
        c = a @ b
    c.sum().item()  # waits for the device
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e12


def preflight(args: argparse.Namespace) -> int:
    import importlib.util

    import torch

    out: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__, "device": args.device}
    for mod in ("transformers", "peft", "accelerate", "gymnasium", "textworld", "alfworld", "bm25s"):
        spec = importlib.util.find_spec(mod)
        out[mod] = getattr(__import__(mod), "__version__", "present") if spec else None
    missing = [m for m in ("transformers", "gymnasium", "textworld", "alfworld") if not out[m]]
    if args.device == "cuda":
        if not torch.cuda.is_available():
            missing.append("a CUDA GPU")
        else:
            props = torch.cuda.get_device_properties(0)
            out.update(
                gpu=props.name,
                gpu_mem_gib=round(props.total_memory / 2**30, 1),
                cuda=torch.version.cuda,
                gpus=torch.cuda.device_count(),
            )
            out["bf16_matmul_tflops"] = round(matmul_tflops("cuda", 8192, torch.bfloat16), 1)
    else:
        out["fp32_matmul_tflops"] = round(matmul_tflops("cpu", 512, torch.float32, reps=3), 3)
    from progpo_envs.alfworld.engine import engine_available

    out["alfworld_engine"] = bool(engine_available())
    if not out["alfworld_engine"]:
        missing.append("the ALFWorld engine")
    out["missing"] = missing
    _write(args.json, out)
    if missing:
        print(f"gpu_check preflight: missing {', '.join(missing)}", file=sys.stderr)
        return 2
    return 0


def iteration_phases(rec: dict[str, Any], steps: int) -> dict[str, Any]:
    """The iteration's seconds by phase, split into the one-time cost (compilation), the
    per-iteration cost (resetting the envs) and the per-step costs (the rest: every one of them runs
    once per step played), and the 50-step iteration those imply.

    >>> rec = {"time/iteration_s": 100.0, "time/rollout_s": 70.0, "time/reset_s": 10.0, "time/generate_s": 45.0,
    ...        "time/env_s": 5.0, "time/rollout_other_s": 4.0, "time/credit_s": 6.0, "time/update_s": 30.0,
    ...        "time/old_logprob_s": 8.0, "time/compile_s": 20.0}
    >>> p = iteration_phases(rec, steps=5)
    >>> p["seconds"]["generate"], p["seconds"]["update"], p["one_time_s"], p["per_step_s"], p["unattributed_s"]
    (25.0, 22.0, 20.0, 14.0, 0.0)
    >>> p["paper_iteration_s_estimate"]  # 20 + 10 + 14 * 50
    730.0
    """
    from trainers.runs.summary import phase_seconds

    compile_s = float(rec.get("time/compile_s", 0.0))
    sec = phase_seconds(rec, compile_s)  # the first decode step of each bucket compiles
    it_s = float(rec.get("time/iteration_s", 0.0))
    per_step = sum(v for k, v in sec.items() if k != "reset") / steps
    return {
        "seconds": sec,
        "one_time_s": compile_s,
        "per_iteration_s": sec["reset"],
        "per_step_s": per_step,
        "unattributed_s": it_s - compile_s - sum(sec.values()),
        "paper_iteration_s_estimate": compile_s + sec["reset"] + per_step * PAPER_STEPS,
    }


def iteration(args: argparse.Namespace) -> int:
    """Speed of one iteration of the paper-shaped run, by phase, and its extrapolation to 50 steps."""
    from agents.models import load_model

    rec = _train_record(args.run_dir)
    config_json = Path(args.run_dir) / "config.json"
    cfg = json.loads(config_json.read_text()) if config_json.exists() else _yaml(Path(args.run_dir) / "config.yaml")
    cfg = _flat(cfg)
    steps = int(cfg["max_steps"])
    phases = iteration_phases(rec, steps)
    sec = phases["seconds"]
    params = sum(p.numel() for p in load_model(cfg["model"], device="meta")[0].parameters())
    # every position of a pass is computed forward and backward, the prompt's included: the update
    # processes its input tokens (prompt + response) once per epoch, not only the response tokens
    # that take a loss (update/tokens)
    upd_tokens = float(rec.get("update/input_tokens", rec.get("update/tokens", 0.0))) * int(cfg.get("ppo_epochs", 1))
    out = {
        "model": cfg["model"],
        "params": params,
        "envs": f"{cfg['num_groups']} x {cfg['group_size']}",
        "steps_per_episode": steps,
        "response_tokens_per_step": cfg["max_new_tokens"],
        **_engine_of(cfg),
        "env_steps": rec.get("env_steps"),
        "response_tokens": rec.get("rollout/response_tokens"),
        "update_tokens": upd_tokens,
        "update_loss_tokens": rec.get("update/tokens"),
        **{f"{k}_s": v for k, v in sec.items()},
        "compile_s": phases["one_time_s"],
        "compiles": rec.get("gen/compiles"),
        "iteration_s": rec.get("time/iteration_s", 0.0),
        "unattributed_s": phases["unattributed_s"],
        "generation_tokens_per_s": rec.get("rollout/response_tokens", 0.0) / max(sec["generate"], 1e-9),
        "update_tokens_per_s": upd_tokens / max(sec["update"], 1e-9),
        # forward + backward: about 6 N FLOPs per token processed
        "update_tflops": 6 * params * upd_tokens / max(sec["update"], 1e-9) / 1e12,
        "peak_gpu_mem_gib": rec.get("gpu/peak_mem_gib"),
        "per_step_s": phases["per_step_s"],
        "per_iteration_s": phases["per_iteration_s"],
        "paper_iteration_s_estimate": phases["paper_iteration_s_estimate"],
        "vs_published": {k: phases["paper_iteration_s_estimate"] / v for k, v in PUBLISHED_S.items()},
    }
    _write(args.json, out)
    return 0


def _engine_of(cfg: dict[str, Any]) -> dict[str, Any]:
    """The generation engine the run used: its config's ``decode`` / ``rollout_dtype`` with ``auto``
    resolved for its device."""
    import torch

    from trainers.build import generation_engine
    from trainers.config import TrainConfig, config_fields

    known = {k: v for k, v in cfg.items() if k in {f.name for f in config_fields()}}
    device = "cuda" if known.get("device") in ("cuda", "auto") and torch.cuda.is_available() else "cpu"
    engine = generation_engine(TrainConfig.from_dict(known, flat=True), torch.device(device))
    return {"decode": engine["decode"], "rollout_dtype": engine["rollout_dtype"] or "fp32"}


def _flat(cfg: dict[str, Any]) -> dict[str, Any]:
    """A run's config.yaml, flat (it is written in sections)."""
    from trainers.config import flatten_sections

    return flatten_sections(cfg, warn=False)


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(path.read_text())


def _weights(run_dir: str) -> dict[str, Any]:
    """The latest checkpoint's weights, loaded as the trainer loads them: verified against its
    checksum and unpickled with ``weights_only`` (a crafted run dir cannot run code)."""
    from trainers.runs.checkpoint import latest_checkpoint, load_checkpoint

    return load_checkpoint(latest_checkpoint(run_dir), require=("model",))["model"]


def update_agreement(w0: dict[str, Any], wa: dict[str, Any], wb: dict[str, Any], tol: float = 1e-3) -> dict[str, Any]:
    """Whether two updates of the same weights ``w0`` (to ``wa`` and to ``wb``) agree, in float64
    and tensor by tensor: the cosine of the whole update vectors (from per-tensor dot products and
    norms, no clamping: a value outside [-1, 1] is an arithmetic error and fails), the largest
    difference against the largest update, and the tensor where the two differ most.

    AdamW's first step moves each weight by about lr * sign(g): where |g| is near eps a different
    summation order flips a few updates, so the whole vectors are compared, within ``tol``.

    >>> import torch
    >>> w0 = {"w": torch.zeros(3)}
    >>> update_agreement(w0, {"w": torch.tensor([1e-5, -1e-5, 2e-5])}, {"w": torch.tensor([1e-5, -1e-5, 2e-5])})["updates_agree"]
    True
    >>> update_agreement(w0, {"w": torch.tensor([1e-5, -1e-5, 2e-5])}, {"w": torch.tensor([-1e-5, 1e-5, 2e-5])})["updates_agree"]
    False
    """
    import math

    keys = [k for k in wa if k in w0 and k in wb]
    dot = na = nb = 0.0
    worst, worst_key, max_abs = 0.0, None, 0.0
    for k in keys:
        base = w0[k].double()
        da, db = wa[k].double() - base, wb[k].double() - base
        dot += float((da * db).sum())
        na += float((da * da).sum())
        nb += float((db * db).sum())
        diff = float((da - db).abs().max()) if da.numel() else 0.0
        max_abs = max(max_abs, float(da.abs().max()) if da.numel() else 0.0)
        if diff > worst:
            worst, worst_key = diff, k
    cosine = dot / math.sqrt(na * nb) if na > 0 and nb > 0 else float("nan")
    in_range = -1.0 - 1e-9 <= cosine <= 1.0 + 1e-9
    return {
        "weight_update_cosine": cosine,
        "weight_update_max_abs_diff": worst,
        "weight_update_max_abs": max_abs,
        "worst_tensor": worst_key,
        "params_compared": len(keys),
        "updates_agree": bool(in_range and cosine > 1 - tol),
    }


def fsdp(args: argparse.Namespace) -> int:
    """FSDP2 at world size 1 against the plain update on the same batch: the rollouts must be
    identical (same seed), the update statistics equal, and the weight updates the same."""

    from agents.models import load_model

    plain, sharded = _train_record(args.plain), _train_record(args.fsdp)
    same_batch = all(
        plain.get(k) == sharded.get(k) for k in ("success", "coverage_rate", "adv/abs_mean", "update/tokens")
    )
    w0 = {k: v.cpu() for k, v in load_model(args.model, device=args.device)[0].state_dict().items()}
    agreement = update_agreement(w0, _weights(args.plain), _weights(args.fsdp), args.tol)
    rel = abs(plain["update/grad_norm"] - sharded["update/grad_norm"]) / max(abs(plain["update/grad_norm"]), 1e-12)
    out = {
        "same_batch": same_batch,
        "grad_norm_plain": plain["update/grad_norm"],
        "grad_norm_fsdp2": sharded["update/grad_norm"],
        "grad_norm_rel_diff": rel,
        "pg_loss_plain": plain["update/pg_loss"],
        "pg_loss_fsdp2": sharded["update/pg_loss"],
        **agreement,
    }
    out["ok"] = bool(same_batch and rel < args.tol and agreement["updates_agree"])
    _write(args.json, out)
    return 0 if out["ok"] else 1


def short(args: argparse.Namespace) -> int:
    """The short end-to-end run: its train record and its report exist and say what ProGPO did."""
    rec = _train_record(args.run_dir)
    report = (Path(args.run_dir) / "summary.md").read_text()
    out = {
        "success": rec.get("success"),
        "all_failed_frac": rec.get("all_failed_frac"),
        "coverage_rate": rec.get("coverage_rate"),
        "progress_groups": rec.get("adv/progress_groups"),
        "iteration_s": rec.get("time/iteration_s"),
        "report_lines": len(report.splitlines()),
        "report_says_where_progpo_acted": "Where ProGPO acted" in report,
    }
    out["ok"] = bool(out["report_says_where_progpo_acted"])
    _write(args.json, out)
    return 0 if out["ok"] else 1


def _fmt(x: Any, nd: int = 1) -> str:
    if isinstance(x, float):
        return f"{x:,.{nd}f}"
    return "-" if x is None else str(x)


def _engine_rows(engines: dict[str, Any]) -> list[tuple[str, str]]:
    """One row per generation engine of ``benchmarks/decode_engines.py``'s JSON: tokens/s, the
    ratio to the loop and the first (compiling) call."""
    rows = engines.get("rows", [])
    base = next((r["tokens_per_s"] for r in rows if r["engine"] == "loop"), None)
    shape = f"{engines.get('batch')} x {engines.get('tokens')}"
    return [
        (
            f"engine {r['engine']} ({shape}): tokens/s, x loop, first call s",
            f"{_fmt(r['tokens_per_s'])}, {_fmt(r['tokens_per_s'] / base, 2) if base else '-'}, {_fmt(r['first_s'])}",
        )
        for r in rows
    ]


def _update_path_rows(paths: dict[str, Any], peak: Any) -> list[tuple[str, str]]:
    """One row per update path of ``benchmarks/update_paths.py``'s JSON (TFLOP/s and its share of
    the measured matmul rate, padding, peak memory, ratio to the prefix order), then its costliest
    operators."""
    rows = paths.get("rows", [])
    base = next((r["seconds"] for r in rows if r["path"] == "prefix"), None)
    out = [
        (
            f"update path {r['path']} ({paths.get('steps')} steps): TFLOP/s, % of matmul, padding, peak GiB, x prefix",
            f"{_fmt(r['update_tflops'])}, {_fmt(_share(r['update_tflops'], peak), 1)}%, {100 * r['padding']:.1f}%, "
            f"{_fmt(r.get('peak_gpu_mem_gib'))}, {_fmt(base / r['seconds'], 2) if base else '-'}",
        )
        for r in rows
    ]
    top = paths.get("profile", [])
    if top:
        out.append(
            (
                "update's costliest operators (share of self time)",
                "; ".join(f"{t['op']} {100 * t['share']:.0f}%" for t in top[:5]),
            )
        )
    return out


def _share(x: Any, of: Any) -> float | None:
    """``x`` as a percentage of ``of`` (``None`` when either is missing)."""
    return 100.0 * x / of if isinstance(x, (int, float)) and isinstance(of, (int, float)) and of else None


def report(args: argparse.Namespace) -> int:
    out_dir = Path(args.out)
    parts = {
        name: json.loads((out_dir / f"{name}.json").read_text())
        for name in ("preflight", "iteration", "engines", "update_paths", "fsdp", "short")
        if (out_dir / f"{name}.json").exists()
    }
    steps = {}
    status_file = out_dir / "steps.txt"
    if status_file.exists():
        for line in status_file.read_text().splitlines():
            name, _, status = line.partition(" ")
            steps[name] = status
    merged = {"steps": steps, **parts}
    (out_dir / "gpu_check.json").write_text(json.dumps(merged, indent=1, default=str))
    pre, it, fs, sh = (parts.get(k, {}) for k in ("preflight", "iteration", "fsdp", "short"))
    peak = pre.get("bf16_matmul_tflops", pre.get("fp32_matmul_tflops"))
    rows = [
        ("device", f"{pre.get('gpu', pre.get('device'))} ({pre.get('gpu_mem_gib', '-')} GiB)"),
        ("python / torch / transformers", f"{pre.get('python')} / {pre.get('torch')} / {pre.get('transformers')}"),
        ("matmul TFLOP/s", _fmt(pre.get("bf16_matmul_tflops", pre.get("fp32_matmul_tflops")), 2)),
        ("paper-shaped model", _fmt(it.get("model"))),
        (
            "envs x steps x answer tokens",
            f"{it.get('envs')} x {it.get('steps_per_episode')} x {it.get('response_tokens_per_step')}",
        ),
        ("decode engine / rollout weights", f"{_fmt(it.get('decode'))} / {_fmt(it.get('rollout_dtype'))}"),
        ("generation tokens/s (target 12,000)", _fmt(it.get("generation_tokens_per_s"))),
        ("update input tokens/s (prompt + response)", _fmt(it.get("update_tokens_per_s"))),
        (
            "update TFLOP/s at 6 N per token, % of measured matmul (target 35%)",
            f"{_fmt(it.get('update_tflops'))}, {_fmt(_share(it.get('update_tflops'), peak), 1)}%",
        ),
        ("peak GPU memory (GiB)", _fmt(it.get("peak_gpu_mem_gib"))),
        ("one-time: compile (s, graphs)", f"{_fmt(it.get('compile_s'))}, {_fmt(it.get('compiles'), 0)}"),
        ("per iteration: env reset (s)", _fmt(it.get("reset_s"))),
        (
            "per step s: generate / env / loop / credit / old-logprob / update",
            " / ".join(
                _fmt(it.get(f"{k}_s")) for k in ("generate", "env", "rollout_other", "credit", "old_logprob", "update")
            ),
        ),
        ("unattributed s (target within 5%)", f"{_fmt(it.get('unattributed_s'), 2)} of {_fmt(it.get('iteration_s'))}"),
        (f"{PAPER_STEPS}-step iteration, estimated (s; target 400)", _fmt(it.get("paper_iteration_s_estimate"))),
        *_engine_rows(parts.get("engines", {})),
        *_update_path_rows(parts.get("update_paths", {}), peak),
        *[
            (f"ratio to {k} ({v:.0f} s)", _fmt((it.get("vs_published") or {}).get(k), 2))
            for k, v in PUBLISHED_S.items()
        ],
        (
            "FSDP2 (world 1) vs plain update",
            f"{'ok' if fs.get('ok') else 'FAIL' if fs else '-'}: grad-norm rel diff "
            f"{_fmt(fs.get('grad_norm_rel_diff'), 2) if fs else '-'}, update cosine {_fmt(fs.get('weight_update_cosine'), 6) if fs else '-'}",
        ),
        (
            "short ProGPO iteration",
            f"{'ok' if sh.get('ok') else 'FAIL' if sh else '-'}: success {_fmt(sh.get('success'), 3)}, "
            f"all-failed {_fmt(sh.get('all_failed_frac'), 3)}, progress groups {_fmt(sh.get('progress_groups'), 0)}",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"| {'measure':{width}s} | value |\n|{'-' * (width + 2)}|---|")
    for name, value in rows:
        print(f"| {name:{width}s} | {value} |")
    failed = [k for k, v in steps.items() if v != "ok"]
    print(f"\nsteps: {', '.join(f'{k} {v}' for k, v in steps.items()) or '-'}")
    print(f"-> {out_dir / 'gpu_check.json'}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/gpu_check.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    commands = {"preflight": preflight, "iteration": iteration, "fsdp": fsdp, "short": short, "report": report}
    parsers = {name: sub.add_parser(name) for name in commands}
    for name in ("iteration", "short"):
        parsers[name].add_argument("run_dir")
    for name in ("preflight", "iteration", "fsdp", "short"):
        parsers[name].add_argument("--json")
    parsers["preflight"].add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parsers["fsdp"].add_argument("plain")
    parsers["fsdp"].add_argument("fsdp")
    parsers["fsdp"].add_argument("--model", required=True)
    parsers["fsdp"].add_argument("--device", default="cpu")
    parsers["fsdp"].add_argument(
        "--tol", type=float, default=1e-3, help="grad-norm relative difference / 1 - cosine allowed"
    )
    parsers["report"].add_argument("out")
    args = ap.parse_args(argv)
    return commands[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
