"""The leaderboard site, rebuilt from the run records and the published baselines: a
static folder (no server, no CDN) that works from the file system or any static host.

Imports neither TensorFlow nor any module that does, so a report builds in seconds on a
machine without it.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from baselines import load_claims, load_dataset_notes, load_published
from benchmarks.errors import PrivboardError
from reports.audits import attach_audits
from reports.claims import check_claims
from reports.load import ReportError, load_records
from reports.rows import compute_rows, metric_by_dataset

__all__ = ["ReportError", "add_arguments", "build", "current_configurations", "main", "run"]


def current_configurations(extra_suites: list[str] = ()) -> set[str]:
    """The configuration identities of every cell of the built-in suites (and of the
    given suite files): a record of any other configuration is superseded."""
    from benchmarks.suites import load_suite, suite_names

    return {cell.config_id for name in [*suite_names(), *extra_suites]
            for cell in load_suite(name).cells}


def build(results: Path, out: Path, tolerance: float = 1.0,
          current_configs: set[str] | None = None, show_superseded: bool = False) -> Path:
    """Build the site into ``out`` and return the path of its index.html.

    Records whose configuration is not in ``current_configs`` are superseded: left out
    of every table, plot and claim unless ``show_superseded``, and counted in a notice.
    ``current_configs=None`` treats every record as current.

    The site is written to a temporary folder next to ``out`` and swapped in at the
    end, so a failure leaves the previous site (or nothing) and never a half-written one.
    """
    results, out = Path(results), Path(out)
    if tolerance < 0:
        raise ReportError(f"tolerance must be >= 0, got {tolerance}")
    published = load_published()
    claims = load_claims()
    notes = load_dataset_notes()
    records = load_records(results, metric_by_dataset(published), current_configs)
    superseded = records[records["superseded"]]
    shown = records if show_superseded else records[~records["superseded"]]
    runs, audits = shown[~shown["audit"]], shown[shown["audit"]]
    rows = attach_audits(compute_rows(runs, published, tolerance), audits, runs)
    checked = check_claims(claims, runs)
    notice = {"records": len(superseded), "configurations": superseded["config_id"].nunique(),
              "shown": show_superseded}

    # matplotlib is slow to import: --help and bad input stay instant without it.
    from reports.render import write_site

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.building-"))
    try:
        write_site(staging, rows, shown, published, checked, notes, tolerance, results, notice)
        _swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out / "index.html"


def _swap_in(staging: Path, out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ReportError(f"{out} exists and is not a directory")
    os.chmod(staging, 0o755)  # mkdtemp makes it private; a site is meant to be read
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        out.rename(old)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                        help="folder of run records (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("reports/site"), metavar="DIR",
                        help="where the site goes; replaced whole (default: %(default)s)")
    parser.add_argument("--tolerance", type=float, default=1.0,
                        help="mark differences from the paper beyond this many accuracy "
                             "points (RMSE: a hundredth of it) (default: %(default)s)")
    parser.add_argument("--suite", action="append", default=[], metavar="FILE.toml",
                        help="a suite file of your own whose configurations count as "
                             "current (repeatable; the built-in suites always do)")
    parser.add_argument("--show-superseded", action="store_true",
                        help="also show records whose configuration is in no current "
                             "suite (flagged as superseded)")


def run(args: argparse.Namespace) -> int:
    index = build(args.results, args.out, args.tolerance,
                  current_configurations(args.suite), args.show_superseded)
    print(f"leaderboard written to {index}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="privboard report",
        description="Build the HTML leaderboard from run records and published baselines.")
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except PrivboardError as error:
        print(f"privboard report: error: {error}", file=sys.stderr)
        return 2
