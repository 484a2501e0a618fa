"""What the audited twins cost, and whether an honest one is flagged, from run records.

Reads a results folder (or the archive, ``--archive``) and pairs each audited twin with
its configuration's cell of the same seed. Prints, per twin, both training costs, their
ratio against the goal (a twin within 1.5 training runs of its cell), both audits' bounds
and whether the twin is flagged; then the summed wall time of the suite's first seed with its
twins, the work of one ``make bench`` when the folder holds the quick suite.

An SSL prior's cached encoder is charged to the run that reused it
(``RunRecord.cold_wall_time_s``). PATE's cached teachers leave no trace in a record, so
a PATE cell that read them looks cheaper than its twin, which trains its own: compare
the two on results measured from an empty data folder, as a fresh ``make bench`` runs.

    python -m speed.bench_twin_cost --results results
    python -m speed.bench_twin_cost --archive quick
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks import archive
from benchmarks.records import RunRecord, read_records

GOAL = 1.5


def records(args: argparse.Namespace) -> list[RunRecord]:
    if args.archive:
        manifest = archive.read_manifest(archive.ARCHIVE / args.archive)
        if manifest is None:
            sys.exit(f"bench_twin_cost: the archive holds no suite {args.archive!r}")
        listed = {entry["cell_id"] for entry in manifest["records"].values()}
        return [r for r in archive.load() if r.cell_id in listed]
    if not args.results.is_dir():
        sys.exit(f"bench_twin_cost: no results folder {args.results}")
    return list(read_records(args.results))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--results", type=Path, default=Path("results"),
                        help="results folder to read (default: results)")
    source.add_argument("--archive", metavar="SUITE", help="read this suite of the archive")
    args = parser.parse_args(argv)

    found = [r for r in records(args) if r.ok and not r.is_verification]
    cells = {(r.config_id, r.seed): r for r in found if not r.is_audit}
    twins = [r for r in found if r.is_audit]
    if not twins:
        sys.exit("bench_twin_cost: no audited twin among these records")
    first_seed = min(r.seed for r in found)

    print(f"{'twin':<55} {'cell s':>8} {'twin s':>8} {'ratio':>6}  release  model  flagged")
    worst = 0.0
    for twin in sorted(twins, key=RunRecord.describe):
        cell = cells.get((twin.config_id, twin.seed))
        release = (twin.audit.get("release") or {}).get("epsilon_lower_bound")
        bounds = (f"{'-' if release is None else f'{release:.2f}':>7}  "
                  f"{twin.audit['epsilon_lower_bound']:5.2f}  {twin.audit['flagged']}")
        if cell is None:
            print(f"{twin.describe():<55} {'-':>8} {twin.cold_wall_time_s:8.0f} {'-':>6}  "
                  f"{bounds}")
            continue
        cell_s, twin_s = cell.cold_wall_time_s, twin.cold_wall_time_s
        worst = max(worst, twin_s / cell_s)
        print(f"{twin.describe():<55} {cell_s:8.0f} {twin_s:8.0f} {twin_s / cell_s:6.2f}  "
              f"{bounds}")
    flagged = [t.describe() for t in twins if t.audit["flagged"]]
    print(f"\nlargest twin / cell training cost: {worst:.2f} (goal <= {GOAL}: "
          f"{'met' if worst <= GOAL else 'NOT MET'})")
    print(f"flagged twins: {len(flagged)} of {len(twins)}"
          + "".join(f"\n  {name}" for name in flagged))
    first = [r for r in found if r.seed == first_seed]
    threads = sorted({r.provenance.get("threads") for r in first}, key=str)
    print(f"seed {first_seed} with its twins: {len(first)} records, "
          f"{sum(r.wall_time_s for r in first) / 60:.1f} min of summed wall time "
          f"(threads per cell: {', '.join(map(str, threads))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
