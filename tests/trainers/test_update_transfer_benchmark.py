"""`benchmarks/update_transfer.py` measures what one update does on independent batches."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="training extra [train] not installed")


def _row(table: str, spec: str) -> list[float]:
    line = next(line for line in table.splitlines() if line.startswith(f"| progpo-gigpo | {spec} |"))
    return [float(cell.split()[0]) for cell in line.strip("|").split("|")[2:]]  # steps, dJ x 2, dlogp x 2


@pytest.mark.slow
def test_update_transfer_quick_run(tmp_path, alfworld_engine_available, run_script):
    out = tmp_path / "ut"
    flags = "--configs sgd:0,adam:1e-2 --batches 1 --measure-groups 2 --bc-steps 5 --bc-episodes 4 --num-groups 2"
    run = run_script(
        "benchmarks/update_transfer.py", *flags.split(), *"--group-size 4 --max-steps 8 --out".split(), out, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
    table = (out / "table.md").read_text()
    assert table.strip() in run.stdout
    still, moved = _row(table, "sgd:0"), _row(table, "adam:1e-2")
    assert still[0] == moved[0] > 0  # the same update batch, with steps to update
    assert still[1:] == [0.0, 0.0, 0.0, 0.0]  # lr 0: each config starts from pi_0 and nothing moves
    assert moved[3] != 0.0 and moved[4] != 0.0  # a real step changes the log-probs on both splits
