"""What a process records of itself in ``provenance.jsonl`` (``trainers/runs/provenance.py``):
the code (commit, clean or not, plug-in files and their hashes), the machine (host, CPU, library
versions), the compute path and the start; when a line is added and when it is not; what a
resume leaves; and how the plug-ins of two processes are compared."""

from __future__ import annotations

import hashlib
import json
import platform
import socket
from importlib import metadata
from pathlib import Path

import pytest

from trainers.runs import provenance
from trainers.runs.provenance import (
    COMPUTE_FIELDS,
    append_end,
    append_provenance,
    append_resume,
    compute_path,
    git_state,
    plugin_changes,
    plugin_files,
    provenance_record,
    read_provenance,
)


def test_a_record_names_the_code_the_machine_the_compute_path_and_the_start():
    rec = provenance_record(3, {"torch_threads": 2, "device": "cpu", "plugins": []})
    assert rec["kind"] == "provenance" and rec["iteration"] == 3
    assert rec["commit"] == git_state()[0] and rec["dirty"] == git_state()[1]
    assert rec["host"] == socket.gethostname() and rec["cpu"]
    assert rec["versions"]["python"] == platform.python_version()
    assert rec["versions"]["numpy"] == metadata.version("numpy") and rec["versions"]["torch"] == metadata.version(
        "torch"
    )
    assert set(rec["compute"]) == set(COMPUTE_FIELDS) and rec["compute"]["torch_threads"] == 2
    assert rec["compute"]["micro_batch_tokens"] is None  # a field the config lacks: None, not absent
    assert "plugins" not in rec  # a run without plug-ins records none


def test_the_cpu_is_the_model_name_the_kernel_reports():
    line = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")), None)
    if line is None:
        pytest.skip("no model name in /proc/cpuinfo here")
    assert provenance._cpu_model() == line.split(":", 1)[1].strip()


def test_a_library_that_is_not_installed_is_recorded_as_none(monkeypatch):
    real = metadata.version

    def version(name: str) -> str:
        if name == "transformers":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(provenance.metadata, "version", version)
    versions = provenance._versions()
    assert versions["transformers"] is None and versions["torch"] == real("torch")


def test_outside_a_checkout_the_commit_and_cleanliness_are_unknown(tmp_path):
    assert git_state(tmp_path) == (None, None)


def test_a_plugin_file_is_recorded_with_its_absolute_path_and_hash_and_a_module_with_its_file(tmp_path):
    plugin = tmp_path / "p.py"
    plugin.write_bytes(b"x = 1\n")
    files = plugin_files([str(plugin), "json", "no_such_module_xyz", str(tmp_path / "gone.py")])
    assert files[0] == {"plugin": str(plugin), "path": str(plugin), "sha256": hashlib.sha256(b"x = 1\n").hexdigest()}
    assert files[1]["path"] == str(Path(json.__file__).resolve()) and len(files[1]["sha256"]) == 64
    assert files[2] == {"plugin": "no_such_module_xyz", "path": None, "sha256": None}
    assert files[3]["sha256"] is None and files[3]["path"] == str(tmp_path / "gone.py")
    rec = provenance_record(0, {"plugins": [str(plugin)]})
    assert rec["plugins"] == files[:1]


def test_plugin_changes_say_what_changed_was_added_or_is_gone(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 1\n")
    before = [{"kind": "provenance", "plugins": plugin_files([str(a), str(b)])}, {"kind": "end"}]
    assert plugin_changes(before, {"plugins": [str(a), str(b)]}) == []
    old = hashlib.sha256(a.read_bytes()).hexdigest()[:12]
    a.write_text("x = 2\n")
    new = hashlib.sha256(a.read_bytes()).hexdigest()[:12]
    c = tmp_path / "c.py"
    c.write_text("z = 1\n")
    assert plugin_changes(before, {"plugins": [str(a), str(c)]}) == [
        f"{a} changed (sha256 {old} -> {new})",
        f"{b} gone",
        f"{c} added",
    ]
    assert plugin_changes([], {"plugins": [str(c)]}) == [f"{c} added"]  # no earlier process: all new
    later = [*before, {"kind": "provenance", "plugins": plugin_files([str(a)])}]
    assert plugin_changes(later, {"plugins": [str(a)]}) == []  # compared with the last process only


def test_a_line_is_added_when_a_process_differs_and_a_resume_always_leaves_one(tmp_path):
    first = append_provenance(tmp_path, 0, {"torch_threads": 1})
    assert first is not None and first["iteration"] == 0
    assert append_provenance(tmp_path, 4, {"torch_threads": 1}) is None  # the same process again
    assert append_provenance(tmp_path, 4, {"torch_threads": 2})["iteration"] == 4
    end = append_end(tmp_path, 5)
    resume = append_resume(tmp_path, 5)
    accepted = append_resume(tmp_path, 6, ["p.py changed (sha256 a -> b)"])
    records = read_provenance(tmp_path)
    assert [r["kind"] for r in records] == ["provenance", "provenance", "end", "resume", "resume"]
    assert records[2] == end and records[3] == resume and "plugin_changes_accepted" not in resume
    assert accepted["plugin_changes_accepted"] == ["p.py changed (sha256 a -> b)"] and accepted["iteration"] == 6
    assert resume["host"] == socket.gethostname() and resume["started"].endswith("Z")


def test_a_torn_last_line_ends_the_read_and_a_run_without_the_file_has_none(tmp_path):
    append_provenance(tmp_path, 0, {})
    with open(tmp_path / "provenance.jsonl", "a") as fh:
        fh.write('{"kind": "end", "iter')
    assert [r["kind"] for r in read_provenance(tmp_path)] == ["provenance"]
    assert read_provenance(tmp_path / "absent") == []


def test_the_compute_path_reads_only_its_fields():
    path = compute_path({"torch_threads": 1, "lr": 0.1, "device": "cpu"})
    assert list(path) == list(COMPUTE_FIELDS) and "lr" not in path and path["device"] == "cpu"
