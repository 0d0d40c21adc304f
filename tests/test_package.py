"""The package installs and registers its env ids."""

import gymnasium as gym


def test_env_ids_registered():
    import progpo_envs

    assert progpo_envs.ALFWORLD_ID in gym.registry
    assert progpo_envs.WEBSHOP_ID in gym.registry
    spec = gym.spec("ProGPO-WebShop-v0")
    assert spec.entry_point == "progpo_envs.webshop.env:WebShopEnv"


def test_a_good_reset_after_a_refused_first_reset_gives_a_working_episode(request):
    """A first reset that raises (a bad task id) must not break the env for the next episode."""
    import progpo_envs

    for env_id in (progpo_envs.WEBSHOP_ID, progpo_envs.ALFWORLD_ID):
        if env_id == progpo_envs.ALFWORLD_ID:
            request.getfixturevalue("alfworld_engine_available")
        env = gym.make(env_id)
        try:
            env.reset(seed=0, options={"task_id": "no-such-task"})
        except ValueError:
            pass
        else:
            raise AssertionError("an unknown task id should be refused")
        obs, info = env.reset(seed=0)
        command = info["admissible_commands"][0].replace("<query>", "shoes")
        obs, reward, terminated, truncated, info = env.step(command)
        assert info["valid_action"] is True and not truncated
        env.close()


# ----------------------------------------------------------------- import-name guard
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _import_in(cwd: Path, module: str) -> subprocess.CompletedProcess:
    """``import module`` in a fresh interpreter whose sys.path is [cwd, repo, ...]."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-c", f"import {module}"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "shadowed, imported",
    [
        ("agents", "trainers.config"),
        ("agents", "trainers.cli.train"),
        ("wrappers", "progpo_envs"),
        ("trainers", "agents"),
        ("wrappers", "trainers.config"),
    ],
)
def test_guard_names_a_shadowing_package(tmp_path: Path, shadowed: str, imported: str) -> None:
    (tmp_path / shadowed).mkdir()
    (tmp_path / shadowed / "__init__.py").write_text("VERSION = 'someone else'\n")
    out = _import_in(tmp_path, imported)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("progpo_envs.guard.ImportNameConflictError: progpo: import name "), last
    assert f"{shadowed!r} resolves to {tmp_path / shadowed / '__init__.py'}" in last
    assert "a folder on sys.path" in last and "remove that folder from sys.path" in last


def test_guard_names_the_distribution(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "__init__.py").write_text("")
    info = tmp_path / "agents-0.0.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agents\nVersion: 0.0.9\n")
    (info / "top_level.txt").write_text("agents\n")
    out = _import_in(tmp_path, "trainers.config")
    last = out.stderr.strip().splitlines()[-1]
    assert "from distribution agents, not to progpo's" in last and "`pip uninstall agents`" in last, last


def test_guard_detects_an_overwritten_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from progpo_envs import guard

    for name in guard.GENERIC_NAMES:  # a copy of the layout, one __init__ overwritten by someone else
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(guard.MARKER + "\n" if name != "wrappers" else "x = 1\n")
    monkeypatch.setattr(guard, "_ROOT", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in guard.GENERIC_NAMES:  # find_spec answers from sys.modules for names already imported
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(guard.ImportNameConflictError, match=r"'wrappers' resolves to .*, overwritten by"):
        guard.check_import_names()


def test_guard_is_silent_on_the_real_install() -> None:
    from progpo_envs.guard import check_import_names

    check_import_names()
    for name in ("agents", "wrappers", "trainers"):
        assert "__progpo_package__ = True" in (REPO / name / "__init__.py").read_text()


# ----------------------------------------------------------------- no import cycles
def test_no_import_cycles_between_modules() -> None:
    """Module-level and function-local imports alike: the import graph of the four packages has no
    cycle (a package importing its own submodules excepted)."""
    mods = {}
    for f in _sources():
        parts = f.relative_to(REPO).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    edges: dict[str, set[str]] = {}
    for name, f in mods.items():
        out = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                cands = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                cands = [a.name for a in node.names]
            else:
                continue
            out |= {c for c in cands if c in mods and not (c.startswith(name + ".") or name.startswith(c + "."))}
        edges[name] = out

    def reaches(src: str, dst: str) -> bool:
        seen, stack = set(), [src]
        while stack:
            for w in edges[stack.pop()]:
                if w == dst:
                    return True
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        return False

    cycles = sorted((a, b) for a in edges for b in edges[a] if reaches(b, a))
    assert not cycles, f"import cycles through: {cycles}"


# ----------------------------------------------------------------- structure
PACKAGES = ("progpo_envs", "wrappers", "agents", "trainers")


def _sources() -> list[Path]:
    """Every Python file of the four packages."""
    return [f for pkg in PACKAGES for f in (REPO / pkg).rglob("*.py")]


#: what each package may import of the others (lower layers only)
LAYERS = {
    "wrappers": set(),
    "progpo_envs": {"wrappers"},
    "agents": {"wrappers", "progpo_envs"},
    "trainers": {"wrappers", "progpo_envs", "agents"},
}


def _imports(f: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every absolute import of ``f``, module level and function level."""
    out = []
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


def test_each_package_imports_only_the_layers_below_it() -> None:
    upward = [
        f"{f.relative_to(REPO)} imports {module}"
        for pkg, allowed in LAYERS.items()
        for f in (REPO / pkg).rglob("*.py")
        for module, _ in _imports(f)
        if module.split(".")[0] in PACKAGES and module.split(".")[0] not in allowed | {pkg}
    ]
    assert not upward, upward


def test_no_private_name_is_imported_from_another_module() -> None:
    private = [
        f"{f.relative_to(REPO)}: {name} from {module}"
        for f in _sources()
        for module, names in _imports(f)
        if module.split(".")[0] in PACKAGES
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert not private, private


def test_no_function_over_80_lines_in_the_packages() -> None:
    long = [
        f"{f.relative_to(REPO)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for f in _sources()
        for node in ast.walk(ast.parse(f.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80
    ]
    assert not long, long


#: where a production module outside trainers/advantages/ may spell a built-in base's name: a
#: default value, or another stack's own estimator of that name
NAMED_BASES = {
    ("trainers/lab/methods.py", "gigpo"): "the lab's default estimator (AXES), its reference arm",
    ("trainers/lab/methods.py", "grpo"): "the validity test's default baseline",
    ("trainers/integrations/verl.py", "grpo"): "VERL_SHIPS: verl's own estimators",
    ("trainers/integrations/verl.py", "rloo"): "VERL_SHIPS: verl's own estimators",
    ("trainers/integrations/verl.py", "gigpo"): "VERL_SHIPS: verl's own estimators",
    ("trainers/integrations/verl_agent.py", "grpo"): "VERL_AGENT_SETUP: verl-agent's own estimators",
    ("trainers/integrations/verl_agent.py", "gigpo"): "VERL_AGENT_SETUP: verl-agent's own estimators",
}


def test_only_the_registry_names_the_built_in_estimators() -> None:
    """Outside trainers/advantages/ no string in code is a built-in base's name, except a
    parameter's default and the entries of NAMED_BASES: everything else reads the registry, so a
    new estimator needs no line elsewhere."""
    from trainers.advantages.registry import BASE_ESTIMATORS

    named = set()
    for f in _sources():
        where = str(f.relative_to(REPO))
        if where.startswith("trainers/advantages/"):
            continue
        tree = ast.parse(f.read_text())
        defaults = {
            id(d)
            for fn in ast.walk(tree)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
            for d in [*fn.args.defaults, *(k for k in fn.args.kw_defaults if k is not None)]
        }
        named |= {
            (where, node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in BASE_ESTIMATORS and id(node) not in defaults
        }
    assert named <= set(NAMED_BASES), sorted(named - set(NAMED_BASES))


def test_a_function_local_import_says_why() -> None:
    """An import inside a function (an optional extra, a heavy import kept off a light path, a
    cycle) says why: a comment on its line or the line above, or the module's
    ``# Imports inside functions:`` note."""
    silent = []
    for f in _sources():
        text = f.read_text()
        if "# Imports inside functions: " in text:
            continue
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and not (
                    "#" in lines[node.lineno - 1]
                    or "#" in lines[node.end_lineno - 1]
                    or lines[node.lineno - 2].strip().startswith("#")
                ):
                    silent.append(f"{f.relative_to(REPO)}:{node.lineno} in {fn.name}")
    assert not silent, sorted(set(silent))


def test_no_trainers_module_imports_more_than_ten_siblings() -> None:
    """A module that reaches into more than ten modules (or rooms) of its own package is a hub."""
    hubs = []
    for f in (REPO / "trainers").rglob("*.py"):
        parts = f.relative_to(REPO).with_suffix("").parts
        package, me = ".".join(parts[:-1]), ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        siblings = set()
        for module, names in _imports(f):
            for name in (module, *(f"{module}.{n}" for n in names)):
                if name.startswith(package + "."):
                    child = f"{package}.{name[len(package) + 1 :].split('.')[0]}"
                    path = REPO.joinpath(*child.split("."))
                    if child != me and (path.with_suffix(".py").exists() or path.is_dir()):
                        siblings.add(child)
        if len(siblings) > 10:
            hubs.append(f"{f.relative_to(REPO)}: {len(siblings)}")
    assert not hubs, hubs


def test_a_module_over_500_lines_says_why() -> None:
    """A module over 500 lines carries an ``# Over 500 lines:`` comment with the reason it is one module."""
    unexplained = [
        f"{f.relative_to(REPO)} ({n} lines)"
        for f in _sources()
        if (n := len(f.read_text().splitlines())) > 500 and "# Over 500 lines: " not in f.read_text()
    ]
    assert not unexplained, unexplained


# ----------------------------------------------------------------- imports cost what they say
#: pure modules -> the package modules (beyond their own package's ``__init__`` and, for a
#: package, its own modules) they may load
PURE_MODULES = {
    "trainers.advantages": {"wrappers", "wrappers.signals", "trainers.plugins"},  # the plug-in loader: stdlib only
    "trainers.loop.losses": {"trainers.loop"},  # its package, whose __init__ imports nothing
    "trainers.seeds": set(),
    "trainers.teachers": {
        "trainers.plugins",
        "wrappers",
        "wrappers.errors",
    },  # the registry and the contract; torch on demand
    "trainers.plugins": set(),
    "trainers.statistics": {"wrappers", "wrappers.signals"},
    "wrappers.signals": set(),
    "wrappers.canonicalize": set(),
    "wrappers.coverage": {"wrappers.canonicalize", "wrappers.signals"},
}


@pytest.mark.parametrize("module", sorted(PURE_MODULES))
def test_a_pure_module_imports_only_what_it_needs(module: str) -> None:
    """In a fresh interpreter: no env, vector env, worker pool, policy or trainer module, and no
    env registration, comes with a pure module."""
    code = (
        "import sys; before = set(sys.modules); import " + module + "; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ours = {
        m
        for m in out.stdout.split()
        if m.split(".")[0] in ("progpo_envs", "wrappers", "agents", "trainers") and not m.startswith(module + ".")
    }
    allowed = PURE_MODULES[module] | {module, module.split(".")[0]}
    assert ours <= allowed, f"{module} also imports {sorted(ours - allowed)}"


def test_every_page_of_docs_is_in_the_sites_table_of_contents() -> None:
    """A page left out of the toctree is unreachable from the site (the strict build, make docs,
    checks links and references; this checks no page is forgotten)."""
    docs = REPO / "docs"
    listed = set()
    for page in [*docs.glob("*.md"), *docs.glob("*.rst")]:
        text = page.read_text()
        for block in text.split("toctree")[1:]:
            listed |= {
                line.strip()
                for line in block.split("```")[0].splitlines()[1:]
                if line.strip() and not line.strip().startswith(":")
            }
    pages = {
        p.relative_to(docs).with_suffix("").as_posix()
        for p in docs.rglob("*.md")
        if "_build" not in p.parts and "api" not in p.parts
    } - {"index"}
    assert pages <= listed, sorted(pages - listed)


def test_no_test_reads_breakage_of_the_package_as_a_skip():
    """``importorskip`` is for optional third-party extras, each with its reason: an import error of
    the package's own modules must fail a test, never skip it."""
    import re
    from pathlib import Path

    own = ("agents", "progpo_envs", "trainers", "wrappers")
    calls = []
    for path in Path(__file__).parent.rglob("*.py"):
        if path == Path(__file__):
            continue
        for m in re.finditer(r"importorskip\((?P<args>[^)]*)\)", path.read_text()):
            calls.append((path.name, m.group("args")))
    assert calls
    for name, args in calls:
        module = args.split(",")[0].strip().strip("\"'")
        assert module.split(".")[0] not in own, f"{name}: importorskip({module})"
        assert "reason=" in args, f"{name}: importorskip({module}) without a reason"
