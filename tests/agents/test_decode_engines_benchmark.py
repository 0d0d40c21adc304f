"""benchmarks/decode_engines.py: the engines' table at a small shape, each answer of the fixed length."""

from __future__ import annotations

import json


def test_the_engines_table_has_a_row_per_engine_and_a_ratio_to_the_loop(tmp_path, run_script):
    out = tmp_path / "engines.json"
    flags = "--batch 3 --tokens 5 --prompt-tokens 40 --repeats 1".split()
    run = run_script("benchmarks/decode_engines.py", *flags, "--engines", "loop,static,static bf16", "--json", out)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["engine"] for r in rows] == ["loop", "static", "static bf16"]
    assert all(r["tokens_per_s"] > 0 and r["compiles"] == 0 for r in rows)
    assert "| loop |" in run.stdout and "| 1.00 |" in run.stdout
    bad = run_script("benchmarks/decode_engines.py", "--engines", "turbo")
    assert bad.returncode != 0 and "unknown engine 'turbo'" in bad.stderr
