"""The leaderboard site, rebuilt from the run records and the published baselines: a
static folder (no server, no CDN) that works from the file system or any static host.

The records are the archive's (our committed results, benchmarks.archive) and a local
results folder's, or a third-party submission's (a bundle of ``privboard submit``,
benchmarks.submission.bundle, shown only when every check of it held and its files match
their digests). Everything else a page says comes from the catalogues written beside
them (benchmarks.catalogue) and from ``baselines/``: a report reads neither the method
registry nor the data folder, and imports neither TensorFlow nor any module that does,
so it builds in seconds on a machine that has neither.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from baselines import load_claims, load_dataset_notes, load_published
from benchmarks import archive as archive_store
from benchmarks.submission import bundle
from benchmarks import catalogue as catalogues
from benchmarks.atomic import atomic_folder
from benchmarks.errors import PrivboardError
from benchmarks.records import SHUFFLED_BATCHES
from reports.audits import attach_audits
from reports.claims import check_claims
from reports.load import ARCHIVED, BOTH, LOCAL, ReportError, load_records
from reports.rows import compute_rows, metric_by_dataset
from reports.verifications import attach_verifications

__all__ = ["ReportError", "add_arguments", "build", "load_rows", "main", "run"]
DEFAULT_RESULTS = Path("results")


def build(results: Path | None, out: Path, tolerance: float = 1.0,
          current_configs: set[str] | None = None, show_superseded: bool = False,
          archive: Path | None = None, submission: bundle.Submission | None = None) -> Path:
    """Build the site into ``out`` from the records of ``archive``, ``results`` and a
    checked ``submission`` (benchmarks.submission.bundle; its rows are third-party), any of
    them None, and return the path of its index.html.

    Records whose configuration is not current are superseded: left out of every table,
    plot and claim unless ``show_superseded``, and counted in a notice. The current
    configurations are ``current_configs``, else those of the catalogues beside the
    records; with neither, every record is current.

    The site is written to a temporary folder next to ``out`` and swapped in at the
    end, so a failure leaves the previous site (or nothing) and never a half-written one.
    """
    out = Path(out)
    board = _leaderboard(results, tolerance, current_configs, show_superseded, archive,
                         submission)
    # matplotlib is slow to import: --help and bad input stay instant without it.
    from reports.render import write_site

    with atomic_folder(out) as staging:
        write_site(staging, board.rows, board.shown, board.published, board.claims,
                   load_dataset_notes(), tolerance, _sources(board.records, submission),
                   board.notice, board.catalogue, submission_facts(submission))
    return out / "index.html"


def load_rows(results: Path | str | None = DEFAULT_RESULTS,
              archive: Path | str | None = archive_store.ARCHIVE,
              tolerance: float = 1.0) -> pd.DataFrame:
    """The leaderboard's rows as a DataFrame (the rows of rows.csv and leaderboard.json),
    from the archive and the local results folder (left out when it does not exist);
    None leaves either out."""
    results = Path(results) if results is not None else None
    if results is not None and not results.is_dir():
        results = None
    archive = Path(archive) if archive is not None else None
    if archive is None and results is None:
        raise ReportError("no records to read: no archive and no results folder")
    return _leaderboard(results, tolerance, None, False, archive, None).rows


class _Leaderboard(NamedTuple):
    rows: pd.DataFrame
    records: pd.DataFrame  # every record read, superseded ones included
    shown: pd.DataFrame  # the records the site shows
    published: pd.DataFrame
    claims: list[dict]
    notice: dict
    catalogue: dict


def _leaderboard(results: Path | None, tolerance: float, current_configs: set[str] | None,
                 show_superseded: bool, archive: Path | None,
                 submission: bundle.Submission | None) -> _Leaderboard:
    """The rows, the records behind them and the claims checked on them (see build)."""
    if tolerance < 0:
        raise ReportError(f"tolerance must be >= 0, got {tolerance}")
    published = load_published()
    archived = archive_store.load(archive) if archive is not None else []
    ours = [catalogues.read(folder) for folder in (archive, results)
            if folder is not None and folder.is_dir()]
    if submission is not None and any(submission.method in found["methods"]
                                      for found in ours if found):
        raise ReportError(f"bundle {submission.folder} is refused: {submission.method} is "
                          f"the name of one of privboard's own methods")
    catalogue = catalogues.merged([*ours, submission.catalogue if submission else None])
    if current_configs is None and catalogue["configurations"]:
        current_configs = set(catalogue["configurations"])
    defaults_of = {name: facts["defaults"] for name, facts in catalogue["methods"].items()}
    protocols = {name: facts.get("audit_protocol", 1)
                 for name, facts in catalogue["methods"].items()}
    records = load_records(results, metric_by_dataset(published), current_configs,
                           archived, defaults_of,
                           submission.records if submission is not None else (), protocols,
                           catalogue["chosen"])
    superseded = records[records["superseded"]]
    shown = records if show_superseded else records[~records["superseded"]]
    runs = shown[shown["record_kind"] == "run"]
    rows = compute_rows(runs, published, tolerance)
    rows = attach_audits(rows, shown[shown["record_kind"] == "audit"], runs)
    rows = attach_verifications(rows, shown[shown["record_kind"] == "verification"])
    notice = {"records": len(superseded), "configurations": superseded["config_id"].nunique(),
              "shown": show_superseded}
    return _Leaderboard(rows, records, shown, published, check_claims(load_claims(), runs),
                        notice, catalogue)


def _sources(records: pd.DataFrame, submission: bundle.Submission | None) -> list[str]:
    """Where the site's records came from, as its index says: never a path of the
    machine that built it."""
    archived = int(records["source"].isin([ARCHIVED, BOTH]).sum())
    local = int(records["source"].isin([LOCAL, BOTH]).sum())
    return ([f"the archive ({_count(archived, 'record')})"] if archived else []) + (
        [f"{_count(local, 'local record')}"] if local else []) + (
        [f"the third-party submission of {submission.package}"]
        if submission is not None else [])


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def submission_facts(submission: bundle.Submission | None) -> dict | None:
    """What the pages say of a submission beside its rows."""
    if submission is None:
        return None
    manifest = submission.manifest
    return {"method": submission.method, "package": submission.package,
            "entry_point": manifest["plugin"]["entry_point"],
            "accounting": manifest["accounting"],
            "self_accounted": manifest["accounting"] == bundle.SELF_ACCOUNTED,
            "unproven": manifest["accounting"].startswith(SHUFFLED_BATCHES),
            "accounting_note": bundle.accounting_note(manifest["accounting"]),
            "own_charges": manifest.get("own_charges", []),
            "source_digest": manifest["source"]["sha256"],
            "checks": len(manifest["checks"]), "command": manifest["command"]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=None, metavar="DIR",
                        help=f"folder of run records of this machine (default: "
                             f"{DEFAULT_RESULTS}, when it exists), or a bundle of privboard "
                             f"submit, whose rows are shown as third-party")
    parser.add_argument("--archive", type=Path, default=archive_store.ARCHIVE,
                        metavar="DIR", help="the archive of committed records (default: "
                                            "the repository's reports/archive)")
    parser.add_argument("--no-archive", action="store_true",
                        help="leave the archive out: the local records alone")
    parser.add_argument("--out", type=Path, default=Path("reports/site"), metavar="DIR",
                        help="where the site goes; replaced whole (default: %(default)s)")
    parser.add_argument("--tolerance", type=float, default=1.0,
                        help="mark differences from the paper beyond this many accuracy "
                             "points (RMSE: a hundredth of it) (default: %(default)s)")
    parser.add_argument("--show-superseded", action="store_true",
                        help="also show records whose configuration is in no current "
                             "suite (flagged as superseded)")


def run(args: argparse.Namespace) -> int:
    results = args.results
    if results is None and DEFAULT_RESULTS.is_dir():
        results = DEFAULT_RESULTS
    archive = None if args.no_archive else args.archive
    if archive is None and results is None:
        raise ReportError(f"no records to report: no archive and no {DEFAULT_RESULTS}/ "
                          f"folder (give --results DIR)")
    submission = None
    if results is not None and bundle.is_bundle(results):
        submission, results = bundle.load(results), None
    index = build(results, args.out, args.tolerance, show_superseded=args.show_superseded,
                  archive=archive, submission=submission)
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
