"""benchmarks/decode_engines.py: the engines' table at a small shape, each answer of the fixed length."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_engines_table_has_a_row_per_engine_and_a_ratio_to_the_loop(tmp_path):
    out = tmp_path / "engines.json"
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "decode_engines.py"),
            *"--batch 3 --tokens 5 --prompt-tokens 40 --repeats 1 --engines".split(),
            "loop,static,static bf16",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["engine"] for r in rows] == ["loop", "static", "static bf16"]
    assert all(r["tokens_per_s"] > 0 and r["compiles"] == 0 for r in rows)
    assert "| loop |" in run.stdout and "| 1.00 |" in run.stdout
    bad = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "decode_engines.py"), "--engines", "turbo"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert bad.returncode != 0 and "unknown engine 'turbo'" in bad.stderr
