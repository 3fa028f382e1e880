"""RESULTS.md's table of the draft's point masses at 5% against a tenth (issue 59), made from the
result files: each `auto-points5` run (bench_grid.py --methods auto-points5, results/points: the
draft proposing a value held by 5% of a column's rows as a point, at most 6) beside `auto` with
the draft of a tenth (at most 3) on the same table, ε and seed: seed 0 from results/grid or
results/corpus (DoctorContacts at ε = 1: results/points/draft10 and results/seeds, made before
its grid cell was replaced), other seeds from results/points.

    python benchmarks/points_table.py       # print the table (paste it into RESULTS.md)
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _two_way(path: Path) -> float:
    return json.loads(path.read_text())["synthetic"]["tvd"]["2"]


def _before(table: str, epsilon: str, seed: str) -> Path | None:
    """`auto`'s run with the draft of a tenth on the same cell."""
    if seed == "0":
        places = [RESULTS / "points" / "draft10", RESULTS / "grid", RESULTS / "corpus"]
    else:
        places = [RESULTS / "seeds", RESULTS / "points"]
    found = [p / f"{table}_e{epsilon}_auto_s{seed}.json" for p in places]
    return next((p for p in found if p.exists()), None)


def rows() -> list[tuple]:
    out = []
    for path in sorted((RESULTS / "points").glob("*_auto-points5_s*.json")):
        table, rest = path.name.split("_e", 1)
        epsilon, seed = rest.split("_")[0], path.stem.rsplit("_s", 1)[1]
        before = _before(table, epsilon, seed)
        run = json.loads(path.read_text())
        out.append((table, epsilon, seed, run["family"], _two_way(path),
                    _two_way(before) if before else None))
    return out


def main() -> None:
    found = rows()
    print("| table | ε | seed | auto picks | 2-way TVD, points at 5% | at a tenth | change |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    changes = []
    for table, epsilon, seed, family, now, before in found:
        change = "" if before is None else f"{now - before:+.4f}"
        if before is not None:
            changes.append(now - before)
        print(f"| {table} | {epsilon} | {seed} | {family} | {now:.4f} | "
              f"{'-' if before is None else f'{before:.4f}'} | {change} |")
    lower = sum(c < 0 for c in changes)
    print(f"\n{lower} of {len(changes)} pairs lower at 5%, {sum(c > 0 for c in changes)} higher; "
          f"median change {statistics.median(changes):+.4f}, from {min(changes):+.4f} to "
          f"{max(changes):+.4f}")


if __name__ == "__main__":
    main()
