"""The plug-in loader in process: what it imports, once, from where, and each way a plug-in can
fail to load said in one line naming it (``trainers/plugins.py``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from plugin_runs import forget_plugin_files

from trainers.plugins import load_plugin, load_plugins, resolved

REGISTERS = """
from trainers.teachers.registry import TeacherSpec, register_teacher, unregister_teacher
unregister_teacher("loader-probe")
register_teacher(TeacherSpec("loader-probe", make=lambda cfg, policy, model: None, label=lambda c: "probe"))
COUNT = globals().get("COUNT", 0) + 1
"""


@pytest.fixture(autouse=True)
def _forget():
    yield
    forget_plugin_files()
    from trainers.teachers.registry import unregister_teacher

    unregister_teacher("loader-probe")


def test_a_plugin_file_is_imported_once_per_path(tmp_path):
    (tmp_path / "p.py").write_text(REGISTERS)
    load_plugin(str(tmp_path / "p.py"))
    load_plugins([str(tmp_path / "p.py"), str(tmp_path / "p.py")])
    module = next(m for name, m in sys.modules.items() if name.startswith("progpo_plugin_"))
    assert module.COUNT == 1
    from trainers.teachers.registry import teacher_names

    assert "loader-probe" in teacher_names()


@pytest.mark.parametrize(
    "source, said",
    [
        ("x = (\n", "plugin {spec} failed to load: SyntaxError: '(' was never closed ({file}:1)"),
        ("def f():\n    raise RuntimeError('boom')\n\nf()\n", "plugin {spec} failed to load: RuntimeError: boom ({file}:2)"),
        ("import not_a_module_anywhere_xyz\n", "plugin {spec} failed to load: ModuleNotFoundError: No module named 'not_a_module_anywhere_xyz' ({file}:1)"),
        ("import sys\nsys.exit(3)\n", "plugin {spec} called sys.exit(3) while loading; a plug-in only registers"),
        ("x = 1\n", "plugin {spec} registered no estimator or teacher (register_estimator / register_teacher); a plug-in that registers nothing would run the built-ins unnoticed"),
    ],
    ids=["syntax", "raises", "missing-dependency", "exits", "registers-nothing"],
)  # fmt: skip
def test_a_plugin_that_cannot_load_is_one_line_and_left_unloaded(tmp_path, source, said):
    path = tmp_path / "bad.py"
    path.write_text(source)
    with pytest.raises(ValueError) as err:
        load_plugin(str(path))
    assert str(err.value) == said.format(spec=path, file=path)
    assert not any(name.startswith("progpo_plugin_") for name in sys.modules)  # a later fix loads afresh
    path.write_text(REGISTERS)
    load_plugin(str(path))


def test_the_debug_variable_keeps_a_plugins_own_traceback(tmp_path, monkeypatch):
    (tmp_path / "bad.py").write_text("raise KeyError('own')\n")
    monkeypatch.setenv("PROGPO_DEBUG", "1")
    with pytest.raises(KeyError, match="own"):
        load_plugin(str(tmp_path / "bad.py"))


@pytest.mark.parametrize(
    "spec, said",
    [
        ("./x", "plugin ./x: not a module name (a.b.c) or a .py file"),
        ("a..b", "plugin a..b: not a module name (a.b.c) or a .py file"),
        ("", "plugin : not a module name (a.b.c) or a .py file"),
        ("no_such_module_xyz", "plugin no_such_module_xyz: No module named 'no_such_module_xyz'; pass an importable module or a .py file"),
        ("missing.py", "plugin missing.py: no such file"),
    ],
)  # fmt: skip
def test_a_plugin_that_is_not_there_is_one_line(spec, said, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as err:
        load_plugin(spec)
    assert str(err.value) == said


def test_a_module_plugin_that_registers_is_loaded_and_one_already_imported_is_left(tmp_path, monkeypatch):
    (tmp_path / "my_teacher_mod.py").write_text(REGISTERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    load_plugin("my_teacher_mod")
    assert sys.modules["my_teacher_mod"].COUNT == 1
    load_plugin("my_teacher_mod")  # imported: not run again, and not taken for one that registers nothing
    assert sys.modules["my_teacher_mod"].COUNT == 1
    del sys.modules["my_teacher_mod"]


def test_a_relative_plugin_file_is_stored_absolute_against_its_yaml_or_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolved("p.py", "/configs") == "/configs/p.py"
    assert resolved("sub/../p.py", "/configs") == "/configs/p.py"
    assert resolved("p.py") == str(tmp_path / "p.py")
    assert resolved("/abs/p.py", "/configs") == "/abs/p.py"
    assert resolved("~/p.py") == os.path.expanduser("~/p.py")
    assert resolved("pkg.mod", "/configs") == "pkg.mod"
    assert Path(resolved("p.py")).is_absolute()


def test_two_plugin_files_are_two_plugins(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "p.py").write_text(REGISTERS.replace("loader-probe", f"loader-probe-{name}"))
    from trainers.teachers.registry import teacher_names, unregister_teacher

    try:
        load_plugins([str(tmp_path / "a" / "p.py"), str(tmp_path / "b" / "p.py")])  # one file name, two paths
        assert {"loader-probe-a", "loader-probe-b"} <= set(teacher_names())
    finally:
        unregister_teacher("loader-probe-a")
        unregister_teacher("loader-probe-b")


def test_an_error_without_a_message_is_named_by_its_type(tmp_path):
    (tmp_path / "bad.py").write_text("raise RuntimeError()\n")
    with pytest.raises(ValueError) as err:
        load_plugin(str(tmp_path / "bad.py"))
    assert str(err.value) == f"plugin {tmp_path / 'bad.py'} failed to load: RuntimeError ({tmp_path / 'bad.py'}:1)"


def test_a_missing_dependency_keeps_its_cause_only_under_the_debug_variable(tmp_path, monkeypatch):
    (tmp_path / "bad.py").write_text("import not_a_module_anywhere_xyz\n")
    with pytest.raises(ValueError) as plain:
        load_plugin(str(tmp_path / "bad.py"))
    assert plain.value.__cause__ is None
    monkeypatch.setenv("PROGPO_DEBUG", "1")
    with pytest.raises(ValueError) as debug:
        load_plugin(str(tmp_path / "bad.py"))
    assert isinstance(debug.value.__cause__, ModuleNotFoundError)


def test_a_dotted_module_plugin_loads_and_its_missing_dependency_is_its_own_failure(tmp_path, monkeypatch):
    pkg = tmp_path / "probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "teach.py").write_text(REGISTERS)
    (pkg / "broken.py").write_text("import not_a_module_anywhere_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        load_plugin("probe_pkg.teach")
        assert sys.modules["probe_pkg.teach"].COUNT == 1
        with pytest.raises(ValueError) as err:
            load_plugin("probe_pkg.broken")
        assert str(err.value).startswith("plugin probe_pkg.broken failed to load: ModuleNotFoundError: No module named")
        with pytest.raises(ValueError, match="plugin probe_pkg.absent: No module named 'probe_pkg.absent'"):
            load_plugin("probe_pkg.absent")
    finally:
        for name in [m for m in sys.modules if m.startswith("probe_pkg")]:
            del sys.modules[name]
