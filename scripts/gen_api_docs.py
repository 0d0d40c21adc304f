"""Write docs/api.md: every public name of the four packages, its signature and its docstring's
first paragraph, read from the source (nothing is imported, so optional extras need not be
installed).

    python scripts/gen_api_docs.py            # rewrite docs/api.md
    python scripts/gen_api_docs.py --check    # exit 1 when docs/api.md is not current

A module's public names are its ``__all__``; a name it re-exports from another module is listed
where it is defined. Private modules (a leading underscore) and ``__main__`` are left out.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("progpo_envs", "wrappers", "agents", "trainers")
OUT = ROOT / "docs" / "api.md"
#: what each package is for, in the order the reference lists them
INTROS = {
    "progpo_envs": "The environments (ALFWorld, WebShop, the toy rooms) and their registration.",
    "wrappers": "Env-agnostic Gymnasium wrappers for the ProGPO signals (gymnasium + numpy only).",
    "agents": "LLM policies: prompts, action parsing, scoring and generation backends, models.",
    "trainers": "Advantage estimators, the PPO update, the rollout/update loop, integrations.",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def public_modules() -> list[tuple[str, Path]]:
    mods = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).parts
            if any(p.startswith("_") and p != "__init__.py" for p in rel) or path.name == "__main__.py":
                continue
            mods.append((module_name(path), path))
    return mods


def _all_names(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:  # e.g. sorted(_SOURCES): the names are the keys of a literal mapping
                    call = node.value
                    if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name):
                        value = _literal_named(tree, call.args[0].id)
                    else:
                        raise
                return sorted(value) if not isinstance(value, list) else list(value)
    return []


def _literal_named(tree: ast.Module, name: str) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return sorted(ast.literal_eval(node.value))
    return []


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return "(no docstring)"
    para = doc.strip().split("\n\n")[0]
    return " ".join(line.strip() for line in para.splitlines())


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef, drop_self: bool = False) -> str:
    """``(args) -> returns``; a constructor's (``drop_self``) without ``self`` and without ``-> None``."""
    args = node.args
    if drop_self and args.args and args.args[0].arg in ("self", "cls"):
        args = ast.arguments(posonlyargs=args.posonlyargs, args=args.args[1:], vararg=args.vararg,
                             kwonlyargs=args.kwonlyargs, kw_defaults=args.kw_defaults, kwarg=args.kwarg,
                             defaults=args.defaults)
    text = f"({ast.unparse(args)})"
    return text + (f" -> {ast.unparse(node.returns)}" if node.returns is not None and not drop_self else "")


def _dataclass_fields(node: ast.ClassDef) -> str:
    names = [st.target.id for st in node.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
             and not ast.unparse(st.annotation).startswith("ClassVar")]
    return f"({', '.join(names)})"


def describe(name: str, node: ast.AST) -> str:
    """One entry: the name with its signature, then its docstring's first paragraph."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"- `{name}{_signature(node)}`: {_first_paragraph(ast.get_docstring(node))}"
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        is_dataclass = any("dataclass" in ast.unparse(d) for d in node.decorator_list)
        sig = _signature(init, drop_self=True) if init else _dataclass_fields(node) if is_dataclass else ""
        bases = f" ({', '.join(ast.unparse(b) for b in node.bases)})" if node.bases else ""
        return f"- class `{name}{sig}`{bases}: {_first_paragraph(ast.get_docstring(node))}"
    return f"- `{name}`: {_constant_doc(node)}"


def _constant_doc(node: ast.AST) -> str:
    value = ast.unparse(node)
    return f"`{value[:100]}{'...' if len(value) > 100 else ''}`"


def module_entries(path: Path) -> tuple[str, list[str]]:
    tree = ast.parse(path.read_text())
    defined: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    defined[t.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            defined[node.target.id] = node.value
    entries = [describe(name, defined[name]) for name in _all_names(tree) if name in defined]
    return _first_paragraph(ast.get_docstring(tree)), entries


def render() -> str:
    lines = ["# API reference", "",
             "Generated from the source by `python scripts/gen_api_docs.py`: every module's `__all__`, each name",
             "with its signature and the first paragraph of its docstring. A name a module re-exports is listed",
             "where it is defined. Examples and details are in the docstrings themselves.", ""]
    for pkg in PACKAGES:
        lines += [f"## `{pkg}`", "", INTROS[pkg], ""]
        for name, path in public_modules():
            if name.split(".")[0] != pkg:
                continue
            summary, entries = module_entries(path)
            if not entries:
                continue
            lines += [f"### `{name}`", "", summary, "", *entries, ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/api.md differs from the source")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(f"{OUT.relative_to(ROOT)} is not current: run python scripts/gen_api_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"-> {OUT.relative_to(ROOT)} ({text.count(chr(10) + '- ')} names)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
