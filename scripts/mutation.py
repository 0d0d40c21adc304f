"""Mutation testing of the core modules: does each module's own test file fail when its code breaks?

    bash scripts/mutation.sh                       # every core module (hours on 2 cores: docs/testing.md)
    bash scripts/mutation.sh statistics estimators # some of them
    bash scripts/mutation.sh --list                # the modules and the tests each is run against

Each core module is mutated by mutmut (pinned in the ``dev`` extra) in a copy of the working tree
(tracked files, as they are now), and each mutant is run against that module's own test files
(the fast ones, less those that read the git history: ``-m "not slow and not git"``). mutmut runs only the tests that reach the mutated function.

A mutant is *killed* when a test fails; it *survives* when every test passes, and a mutant in
code that no selected test reaches counts as surviving too ("no tests"). Some mutants cannot
change behaviour (an equivalent mutant: ``x * 1.0`` for ``x / 1.0``, a message's wording that
no caller reads); those are listed, each with its reason, in ``scripts/mutation_equivalent.txt``
and left out of the ratio:

    kill ratio = killed / (mutants - equivalent - cosmetic)

A *cosmetic* mutant only wraps a string literal in ``XX`` (mutmut's string mutation): a message
keeps its words, so no test that reads it by its words can tell; those are found from each
mutant's diff, not listed by hand.

The table printed (and written to ``--out``, default ``~/.cache/progpo/mutation``, as JSON and
Markdown) gives that ratio per module, then every surviving mutant's name; ``mutmut show NAME``
in the module's work dir prints its diff. The figures are kept in ``docs/testing.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "scripts" / "mutation_equivalent.txt"
T = "tests/trainers/"

#: core module -> (source files mutated, the test files run against them)
MODULES: dict[str, tuple[list[str], list[str]]] = {
    "estimators": (
        [
            f"trainers/advantages/{m}.py"
            for m in (
                "__init__",
                "segments",
                "planpo",
                "hgpo",
                "grpo",
                "gigpo",
                "progpo",
                "registry",
                "options",
                "config",
                "episode",
                "step",
            )
        ],
        [
            T + "test_trainers_advantages.py",
            T + "test_trainers_advantage_options.py",
            T + "test_trainers_planpo_hgpo.py",
            T + "test_trainers_constants.py",
        ],
    ),
    "coverage": (
        ["wrappers/coverage.py", "wrappers/canonicalize.py", "wrappers/signals.py"],
        ["tests/wrappers/test_wrappers_coverage.py", "tests/wrappers/test_wrappers_canonicalize.py"],
    ),
    "alfworld-canonical": (
        ["progpo_envs/alfworld/canonical.py", "progpo_envs/alfworld/text.py"],
        ["tests/alfworld/test_alfworld_offline.py", "tests/alfworld/test_alfworld_env.py"],
    ),
    "group-flags": (
        ["wrappers/group/vector_env.py"],
        [
            "tests/wrappers/test_wrappers_group.py",
            "tests/wrappers/test_wrappers_group_infos.py",
            "tests/wrappers/test_wrappers_group_failures.py",
        ],
    ),
    "webshop-reward": (["progpo_envs/webshop/reward.py"], ["tests/webshop_data/test_webshop_reward.py"]),
    "run-dir": (
        ["trainers/runs/run_dir.py", "trainers/runs/checkpoint.py", "trainers/runs/run_files.py"],
        [
            T + "test_trainers_run_dir.py",
            T + "test_trainers_run_ownership.py",
            T + "test_trainers_planted_links.py",
            T + "test_trainers_reliability.py",
        ],
    ),
    "statistics": (["trainers/statistics.py", "trainers/lab/significance.py"], [T + "test_trainers_statistics.py"]),
    "teacher-routing": (
        [
            "trainers/teachers/targets.py",
            "trainers/teachers/base.py",
            "trainers/teachers/privileged.py",
            "trainers/teachers/hindsight.py",
        ],
        [T + "test_trainers_teachers.py"],
    ),
    "eval-panel": (["trainers/rollouts/eval_episodes.py"], [T + "test_trainers_evaluation.py"]),
    "lab": (
        ["trainers/lab/analysis.py", "trainers/lab/runs.py"],
        [T + "test_progpo_effect_benchmark.py", T + "test_lab_runs.py"],
    ),
    "lab-report": (
        ["trainers/lab/report.py", "trainers/lab/registered.py"],
        [T + "test_progpo_effect_benchmark.py", T + "test_lab_report.py"],
    ),
    "saved-policy": (
        ["trainers/saved_policy.py", "trainers/cli/export.py", "trainers/cli/evaluate.py"],
        [T + "test_trainers_after_training.py"],
    ),
    # the loop's stages: direct tests of each contract (fakes for its collaborators), and the run-dir
    # ownership and rollout-stream tests that cover them through a trainer
    "stages": (
        [f"trainers/loop/{m}.py" for m in ("credit", "updater", "collector", "evaluator", "train_record")]
        + [f"trainers/runs/{m}.py" for m in ("records", "run_checkpoints")],
        [
            T + "test_stages.py",
            T + "test_stage_contracts.py",
            T + "test_trainers_reliability.py",
            T + "test_provenance_times.py",
            T + "test_trainers_run_ownership.py",
            T + "test_trainers_distributed.py",
        ],
    ),
    # the plug-in loader and the teachers' registry
    "plugins": (
        ["trainers/plugins.py", "trainers/teachers/registry.py"],  # the estimators' registry: "estimators"
        [
            T + "test_plugin_loader.py",
            T + "test_teacher_registry.py",
            T + "test_estimator_plugins.py",
            T + "test_teacher_plugins.py",
        ],
    ),
    "strict-yaml": (
        ["trainers/strict_yaml.py"],
        [T + "test_strict_yaml_limits.py", T + "test_bad_input_one_line.py", T + "test_registry_and_card_seams.py"],
    ),
    "sections": (["trainers/loop/sections.py"], [T + "test_stages.py", T + "test_stage_contracts.py"]),
    # the card's text (export.py, which writes it, is saved-policy's)
    "model-card": (["trainers/model_card.py"], [T + "test_model_card.py", T + "test_registry_and_card_seams.py"]),
    "provenance": (["trainers/runs/provenance.py"], [T + "test_provenance_record.py", T + "test_provenance_times.py"]),
    "metrics-rebuild": (
        ["trainers/runs/metrics.py"],
        [T + "test_metrics_file.py", T + "test_stage_contracts.py", T + "test_bad_input_one_line.py"],
    ),
    "lab-methods": (
        ["trainers/lab/methods.py", "trainers/lab/compare.py"],
        [T + "test_lab_compare.py", T + "test_progpo_effect_benchmark.py", T + "test_lab_runs.py"],
    ),
    "dynamic-sampling": (
        ["trainers/sharding.py", "trainers/loop/collector.py", "trainers/finite.py"],
        [T + "test_dynamic_sampling.py", T + "test_nonfinite_and_plugin_safety.py"],
    ),
    # the GPU's default engine, against the loop decoder as the reference
    "static-decoder": (
        ["agents/backends/static.py"],
        ["tests/agents/test_agents_static_backend.py", "tests/agents/test_agents_static_property.py"],
    ),
}


#: module -> test files left out although they import it: their fixture trains runs, which every
#: mutant would repeat (hours), and the module's own fast tests read the same behaviour
LEFT_OUT: dict[str, list[str]] = {
    "model-card": [T + "test_trainers_after_training.py"],
    "metrics-rebuild": [
        T + f"test_{m}.py"
        for m in (
            "trainers_distributed",
            "trainers_e2e",
            "trainers_learning",
            "trainers_loop",
            "trainers_teachers",
            "dynamic_sampling",
            "progpo_effect_benchmark",
        )
    ],
}


#: test files no row runs: the package's layout and import-guard checks, whose fast tests start
#: interpreters that cannot run mutmut's instrumented tree (they fail on every mutant alike)
NEVER = ("tests/test_package.py",)


def module_tests(name: str, tree: Path = ROOT) -> list[str]:
    """The test files run against core module ``name``: its listed ones, and every other test file
    that imports one of its sources (a test that reaches a module is a test of it), less
    :data:`LEFT_OUT`'s."""
    sources, listed = MODULES[name]
    dotted = [f[: -len(".py")].replace("/", ".").removesuffix(".__init__") for f in sources]
    found = []
    for test in sorted((tree / "tests").rglob("test_*.py")):
        text = test.read_text(errors="replace")
        if any(f"import {d}" in text or f"from {d} import" in text for d in dotted):
            found.append(str(test.relative_to(tree)))
    skip = {*LEFT_OUT.get(name, []), *NEVER}
    return [f for f in dict.fromkeys([f for f in listed if (tree / f).exists()] + found) if f not in skip]


def equivalent() -> dict[str, str]:
    """``mutant name -> reason`` from :data:`EQUIVALENT` (``NAME  # reason`` per line)."""
    out: dict[str, str] = {}
    if EQUIVALENT.exists():
        for line in EQUIVALENT.read_text().splitlines():
            name, _, reason = line.partition("#")
            if name.strip():
                out[name.strip()] = reason.strip()
    return out


def _copy_tree(dest: Path, rev: str | None = None) -> None:
    """The working tree's tracked files (as they are now), or commit ``rev``'s tree, into ``dest``."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if rev:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout.split(b"\0")
    for rel in (f.decode() for f in files if f):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _config(sources: list[str], tests: list[str]) -> str:
    quoted = lambda xs: "[" + ", ".join(json.dumps(x) for x in xs) + "]"  # noqa: E731 - a one-line callable, read where it is passed
    also = [
        "agents",
        "progpo_envs",
        "trainers",
        "wrappers",
        "tests",
        "benchmarks",
        "configs",
        "scripts",
        "docs",
        "examples",
        "README.md",
    ]
    return (
        "\n[tool.mutmut]\n"
        f"source_paths = {quoted(sources)}\n"
        f"pytest_add_cli_args_test_selection = {quoted(tests)}\n"
        f"also_copy = {quoted(also)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-m", "not slow and not git", "-x"]\n'
    )


def run_module(name: str, work: Path, children: int, rev: str | None = None) -> dict:
    """Mutate one core module in its own copy of the tree (``rev``: of that commit; its sources
    and tests that the commit lacks are left out); its counts and survivors."""
    tree = work / name
    _copy_tree(tree, rev)
    sources = [f for f in MODULES[name][0] if (tree / f).exists()]
    tests = module_tests(name, tree)
    with open(tree / "pyproject.toml", "a") as fh:
        fh.write(_config(sources, tests))
    t0 = time.perf_counter()
    log = work / f"{name}.log"
    # every mutant's pytest makes its own numbered temp dirs, and concurrent children defeat
    # pytest's pruning of old ones: a full run left thousands (tens of GB) in the system temp dir.
    # They go under the module's work dir instead, removed once the run is counted.
    temp_root = tree / ".pytest-tmp"
    temp_root.mkdir()
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1", PYTEST_DEBUG_TEMPROOT=str(temp_root))
    with open(log, "w") as fh:
        subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(children)],
            cwd=tree,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    shutil.rmtree(temp_root, ignore_errors=True)
    return collect(name, tree, sources, tests, round(time.perf_counter() - t0, 1), log)


def collect(
    name: str, tree: Path, sources: list[str], tests: list[str], seconds: float, log: Path | None = None
) -> dict:
    """The counts and survivors of a finished mutmut run in ``tree`` (the equivalent list and the
    cosmetic rule applied as they stand now)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, "-m", "mutmut", "export-cicd-stats"], cwd=tree, env=env, capture_output=True)
    stats_file = tree / "mutants" / "mutmut-cicd-stats.json"
    if not stats_file.exists():
        raise SystemExit(f"error: mutmut did not finish on {name}; see {log}")
    stats = json.loads(stats_file.read_text())
    listing = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=tree, env=env, capture_output=True, text=True
    ).stdout
    status = dict(re.findall(r"^\s*(\S+): (.+)$", listing, re.M))
    equiv = equivalent()
    not_killed = sorted(n for n, s in status.items() if s.strip() in ("survived", "no tests"))
    cosmetic = [n for n in not_killed if n not in equiv and _only_marks_a_string(tree, n, env)]
    survivors = [n for n in not_killed if n not in equiv and n not in cosmetic]
    excluded = [n for n in not_killed if n in equiv or n in cosmetic]
    counted = stats["total"] - stats.get("skipped", 0) - len(excluded)
    killed = stats["killed"] + stats.get("timeout", 0) + stats.get("segfault", 0)
    return {
        "module": name,
        "sources": sources,
        "tests": tests,
        "total": stats["total"],
        "killed": killed,
        "survived": stats["survived"],
        "no_tests": stats["no_tests"],
        "equivalent": len(excluded) - len(cosmetic),
        "cosmetic": len(cosmetic),
        "ratio": killed / counted if counted else float("nan"),
        "survivors": survivors,
        "seconds": seconds,
        "work_dir": str(tree),
    }


_MARKED = re.compile(r"""(?P<q>["'])XX(?P<body>.*?)XX(?P=q)""")


def _only_marks_a_string(tree: Path, name: str, env: dict) -> bool:
    """Whether mutant ``name`` only wraps a string literal in ``XX`` (mutmut's string mutation):
    the text keeps every word, so a test that reads a message by its words cannot see it; it is
    counted as cosmetic, like an equivalent mutant. Case changes of a string are not: they count.

    >>> bool(_MARKED.sub(lambda m: m["q"] + m["body"] + m["q"], 'f("XXa bXX")') == 'f("a b")')
    True
    """
    diff = subprocess.run(
        [sys.executable, "-m", "mutmut", "show", name], cwd=tree, env=env, capture_output=True, text=True
    ).stdout
    minus = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    if not plus or len(minus) != len(plus):
        return False
    unmarked = [_MARKED.sub(lambda m: m["q"] + m["body"] + m["q"], ln) for ln in plus]
    return unmarked == minus and unmarked != plus


def table(rows: list[dict]) -> str:
    lines = [
        "| module | mutants | killed | survived | no tests | equivalent | cosmetic | kill ratio | s |",
        "|---" * 9 + "|",
    ]
    counts = ("module", "total", "killed", "survived", "no_tests", "equivalent", "cosmetic")
    for r in rows:
        cells = [str(r[k]) for k in counts] + [f"{r['ratio']:.1%}", f"{r['seconds']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help=f"core modules (default: all): {', '.join(MODULES)}")
    ap.add_argument("--list", action="store_true", help="print the modules and their tests, run nothing")
    ap.add_argument("--children", type=int, default=os.cpu_count() or 1, help="mutants run at a time")
    ap.add_argument(
        "--recount",
        action="store_true",
        help="recount the modules' finished runs under --out (the equivalent list and the cosmetic "
        "rule as they stand now), running nothing",
    )
    ap.add_argument(
        "--rev", default=None, help="mutate this commit's tree instead of the working tree (a 'before' figure)"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=Path.home() / ".cache" / "progpo" / "mutation",
        help="work dirs (one per module), results.json and results.md",
    )
    args = ap.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        print(f"error: unknown module(s) {', '.join(unknown)}; one of {', '.join(MODULES)}", file=sys.stderr)
        return 2
    if args.list:
        for name, (sources, tests) in MODULES.items():
            print(f"{name}: {' '.join(sources)}  <-  {' '.join(tests)}")
        return 0
    try:
        import mutmut  # noqa: F401  (imported to check that mutmut is installed)
    except ImportError:
        print("error: mutmut is not installed: pip install -e '.[dev]'", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    if args.recount:
        results = args.out / "results.json"
        before = {r["module"]: r for r in json.loads(results.read_text())} if results.exists() else {}
        for name in args.modules or list(MODULES):
            tree = args.out / name
            if (tree / "mutants" / "mutmut-stats.json").exists() or (tree / "mutants").is_dir():
                sources = [f for f in MODULES[name][0] if (tree / f).exists()]
                tests = module_tests(name, tree)
                rows.append(collect(name, tree, sources, tests, before.get(name, {}).get("seconds", 0.0)))
        print(table(rows))
        (args.out / "results.json").write_text(json.dumps(rows, indent=1))
        (args.out / "results.md").write_text(table(rows) + "\n")
        return 0
    for name in args.modules or list(MODULES):
        print(f"{name}: mutating {', '.join(MODULES[name][0])} ...", flush=True)
        rows.append(run_module(name, args.out, args.children, args.rev))
        r = rows[-1]
        print(
            f"  {r['killed']} of {r['total'] - r['equivalent']} killed ({r['ratio']:.1%}), {r['seconds']:.0f} s",
            flush=True,
        )
    print()
    print(table(rows))
    for r in rows:
        if r["survivors"]:
            print(f"\n{r['module']}: {len(r['survivors'])} surviving (mutmut show NAME in {r['work_dir']}):")
            print("\n".join(f"  {n}" for n in r["survivors"]))
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    (args.out / "results.md").write_text(table(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
