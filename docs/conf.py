"""Sphinx configuration of the documentation site (``make docs``; ``make docs-serve`` serves it).

The pages are the Markdown files of ``docs/`` (MyST); the API reference is rendered from the
docstrings by autodoc and autosummary, whose reST roles (``:class:``, ``:func:``) resolve to the
documented objects. ``.ci/run`` builds it with ``-W -n``: a broken link, a missing page or an
unresolved reference to the package's own names fails the build. References to other libraries
(numpy, torch, gymnasium, the standard library) are not checked: the build runs offline, without
their inventories.
"""

from __future__ import annotations

import importlib
import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "ProGPO"
author = "ProGPO contributors"
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "ProGPO"
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]

# the API reference: every module of the four packages, each object where it is defined
autosummary_generate = True
autosummary_ignore_module_all = True  # every submodule; each object documented where it is defined
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True, "ignore-module-all": True}
autodoc_inherit_docstrings = False
autodoc_typehints = "description"
autodoc_member_order = "bysource"
# optional extras that live in venvs of their own (vLLM, verl) or need a service (Ray, OpenEnv, W&B)
autodoc_mock_imports = ["vllm", "verl", "ray", "openenv", "wandb", "selenium"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # a class's Attributes: section as fields, not a second description of each attribute
napoleon_preprocess_types = False
default_role = None  # `text` in a docstring is text; a reference names its role (:class:, :func:)
suppress_warnings = ["myst.header"]  # docs/experiments.md, a log, skips heading levels

# strict: every reference to the package's own names must resolve
nitpicky = True
_EXTERNAL = (
    "numpy",
    "np",
    "torch",
    "gymnasium",
    "gym",
    "transformers",
    "peft",
    "textworld",
    "yaml",
    "collections",
    "pathlib",
    "typing",
    "argparse",
    "os",
    "random",
    "dataclasses",
    "concurrent",
    "multiprocessing",
    "subprocess",
    "json",
    "re",
    "enum",
    "abc",
    "io",
    "threading",
    "datetime",
    "functools",
    "itertools",
    "contextlib",
    "contextvars",
    "types",
    "importlib",
    "signal",
    "socket",
    "http",
    "urllib",
    "logging",
    "tempfile",
    "shutil",
    "queue",
    "uuid",
    "hashlib",
    "numbers",
    "statistics",
    "math",
    "warnings",
    "openenv",
    "ray",
    "verl",
    "vllm",
    "trl",
    "datasets",
    "stable_baselines3",
    "matplotlib",
    "tqdm",
    "pydantic",
    "fastapi",
    "starlette",
    "uvicorn",
    "jinja2",
    "spacy",
    "rank_bm25",
    "huggingface_hub",
    "safetensors",
    "accelerate",
    "tensorboard",
    "wandb",
    "selenium",
    "psutil",
    "_io",
    "_thread",
    "builtins",
    "bm25s",
    "PyStemmer",
    "mutmut",
    "pytest",
    "hypothesis",
    "mp",
    "npt",
    "nn",
    "F",
)
nitpick_ignore_regex = [
    ("py:.*", rf"~?({'|'.join(_EXTERNAL)})(\..*)?"),  # other libraries: no inventory offline
    ("py:.*", r"[A-Za-z_]*(Error|Exception|Warning|Interrupt|Exit)"),  # the builtin exceptions
    (
        "py:.*",
        r"(int|float|str|bool|bytes|dict|list|tuple|set|frozenset|object|type|callable|None|Any|Callable|"
        r"Iterable|Iterator|Sequence|Mapping|MutableMapping|Literal|Optional|Union|Protocol|Generator|"
        r"SupportsFloat|TypeVar|NoReturn|Self|ClassVar|Awaitable|Coroutine|AsyncIterator|range|slice|"
        r"memoryview|bytearray|complex|property|staticmethod|classmethod|ellipsis|NotImplemented|"
        r"PathLike|Path|Counter|OrderedDict|defaultdict|deque|Namespace|ArgumentParser|Generic)",
    ),
    ("py:.*", r"(.*\.)?_[A-Za-z]\w*"),  # a private helper named in a docstring: not in the reference
    (
        "py:.*",
        r"(ObsType|ActType|RenderFrame|WrapperObsType|WrapperActType|ArrayType|NDArray|Tensor|Module|Env|"
        r"Wrapper|Space|Discrete|Text|Box|VectorEnv|AutoresetMode)",
    ),  # gymnasium's and torch's own names
]


def _resolve_alias(app, env, node, contnode):  # Sphinx's event signature
    """A reference to a re-exported name (``wrappers.GroupVectorEnv``) or to a short name defined
    in another module (``step_advantages``) resolves to the object where it is defined; anything
    else stays unresolved (and fails the strict build)."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    domain = env.get_domain("py")
    candidates = []
    module, _, name = target.rpartition(".")
    if module:
        try:
            obj = getattr(importlib.import_module(module), name)
            full = f"{obj.__module__}.{obj.__qualname__}"
            candidates.append(full)
        except (ImportError, AttributeError, ValueError):
            pass
    candidates += sorted(full for full in domain.objects if full.endswith("." + target))
    for full in candidates:
        if full not in domain.objects:
            continue
        found = domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], full, node, contnode)
        if found is None:  # a role of another kind (``:func:`` on a class): any that resolves
            found = next(
                (n for _, n in domain.resolve_any_xref(env, node["refdoc"], app.builder, full, node, contnode)), None
            )
        if found is not None:
            return found
    return None


def _plain_data_doc(app, what, name, obj, options, lines):  # Sphinx's event signature
    """A data or attribute doc-comment reads ``what it is: how``; napoleon would take the words
    before the colon for a type. An empty type first keeps them text."""
    if what in ("data", "attribute", "property") and lines and ": " in lines[0] and not lines[0].startswith(":"):
        lines[0] = ": " + lines[0]


def setup(app):  # Sphinx's hook
    app.connect("missing-reference", _resolve_alias)
    app.connect("autodoc-process-docstring", _plain_data_doc, priority=400)  # before napoleon (500)
