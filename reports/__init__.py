"""The leaderboard site, rebuilt from the run records and the published baselines: a
static folder (no server, no CDN) that works from the file system or any static host.

The records are the archive's (our committed results, benchmarks.archive), those of
local results folders, and third-party submissions' (bundles of ``privboard submit``,
benchmarks.submission.bundle, each shown only when every check of it held and its files
match their digests). Everything else a page says comes from the catalogues written beside
them (benchmarks.catalogue) and from ``baselines/``: a report reads neither the method
registry nor the data folder, and imports neither TensorFlow nor any module that does,
so it builds in seconds on a machine that has neither.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple, Sequence

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
from reports.load import ARCHIVED, BOTH, LOCAL, ReportError, folders_of, load_records
from reports.rows import compute_rows, metric_by_dataset
from reports.verifications import attach_verifications

__all__ = ["ReportError", "add_arguments", "build", "load_rows", "main", "run"]
DEFAULT_RESULTS = Path("results")


def build(results: Path | Sequence[Path] | None, out: Path, tolerance: float = 1.0,
          current_configs: set[str] | None = None, show_superseded: bool = False,
          archive: Path | None = None,
          submissions: Sequence[bundle.Submission] = ()) -> Path:
    """Build the site into ``out`` from the records of ``archive``, of the folders
    ``results`` (one, several or None) and of checked ``submissions``
    (benchmarks.submission.bundle; their rows are third-party), and return the path of
    its index.html.

    Records whose configuration is not current are superseded: left out of every table,
    plot and claim unless ``show_superseded``, and counted in a notice. The current
    configurations are ``current_configs``, else those of the catalogues beside the
    records; with neither, every record is current.

    The site is written to a temporary folder next to ``out`` and swapped in at the
    end, so a failure leaves the previous site (or nothing) and never a half-written one.
    ``out`` is replaced whole, so it must be new, empty, or a site this function wrote.
    """
    out = Path(out)
    check_site_folder(out)
    board = _leaderboard(folders_of(results), tolerance, current_configs, show_superseded,
                         archive, submissions)
    # matplotlib is slow to import: --help and bad input stay instant without it.
    from reports.render import write_site

    with atomic_folder(out) as staging:
        write_site(staging, board.rows, board.shown, board.published, board.claims,
                   load_dataset_notes(), tolerance, _sources(board.records, submissions),
                   board.notice, board.catalogue,
                   {s.method: submission_facts(s) for s in submissions})
    return out / "index.html"


# The pages every site of build holds: a folder with all three is one it wrote.
SITE_PAGES = ("index.html", "how-to-read.html", "leaderboard.json")


def check_site_folder(out: Path) -> None:
    """ReportError, before anything is read or written, when ``out`` holds something
    that is not a site of ``build``: replacing it whole would delete it."""
    if out.exists() and not out.is_dir():
        raise ReportError(f"--out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not all(
            (out / page).is_file() for page in SITE_PAGES):
        raise ReportError(f"--out {out} is a folder that privboard report did not write (no "
                          f"{', '.join(SITE_PAGES)}), and the site replaces its folder "
                          f"whole: give a new or empty folder, or remove it first")


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
    return _leaderboard(folders_of(results), tolerance, None, False, archive, ()).rows


class _Leaderboard(NamedTuple):
    rows: pd.DataFrame
    records: pd.DataFrame  # every record read, superseded ones included
    shown: pd.DataFrame  # the records the site shows
    published: pd.DataFrame
    claims: list[dict]
    notice: dict
    catalogue: dict


def _leaderboard(results: list[Path], tolerance: float, current_configs: set[str] | None,
                 show_superseded: bool, archive: Path | None,
                 submissions: Sequence[bundle.Submission]) -> _Leaderboard:
    """The rows, the records behind them and the claims checked on them (see build)."""
    if tolerance < 0:
        raise ReportError(f"tolerance must be >= 0, got {tolerance}")
    published = load_published()
    archived = archive_store.load(archive) if archive is not None else []
    ours = [catalogues.read(folder) for folder in (archive, *results)
            if folder is not None and folder.is_dir()]
    submitter: dict[str, Path] = {}
    for submission in submissions:
        if any(submission.method in found["methods"] for found in ours if found):
            raise ReportError(f"bundle {submission.folder} is refused: {submission.method} "
                              f"is the name of one of privboard's own methods")
        if submission.method in submitter:
            raise ReportError(f"bundles {submitter[submission.method]} and "
                              f"{submission.folder} both submit {submission.method}: give "
                              f"one (a suite file of several blocks submits them together)")
        submitter[submission.method] = submission.folder
    catalogue = catalogues.merged([*ours, *(s.catalogue for s in submissions)])
    if current_configs is None and catalogue["configurations"]:
        current_configs = set(catalogue["configurations"])
    defaults_of = {name: facts["defaults"] for name, facts in catalogue["methods"].items()}
    protocols = {name: facts.get("audit_protocol", 1)
                 for name, facts in catalogue["methods"].items()}
    records = load_records(results, metric_by_dataset(published), current_configs,
                           archived, defaults_of,
                           [record for s in submissions for record in s.records], protocols,
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


def _sources(records: pd.DataFrame, submissions: Sequence[bundle.Submission]) -> list[str]:
    """Where the site's records came from, as its index says: never a path of the
    machine that built it."""
    archived = int(records["source"].isin([ARCHIVED, BOTH]).sum())
    local = int(records["source"].isin([LOCAL, BOTH]).sum())
    packages = ", ".join(submission.package for submission in submissions)
    return ([f"the archive ({_count(archived, 'record')})"] if archived else []) + (
        [f"{_count(local, 'local record')}"] if local else []) + (
        [f"the third-party submission{'s' if len(submissions) > 1 else ''} of {packages}"]
        if submissions else [])


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def submission_facts(submission: bundle.Submission) -> dict:
    """What the pages say of a submission beside its rows."""
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
    parser.add_argument("--results", type=Path, nargs="+", action="extend", default=None,
                        metavar="DIR",
                        help=f"folders of run records (default: {DEFAULT_RESULTS}, when it "
                             f"exists) and bundles of privboard submit, whose rows are shown "
                             f"as third-party; any number, e.g. --results {DEFAULT_RESULTS} "
                             f"a.bundle b.bundle")
    parser.add_argument("--archive", type=Path, default=archive_store.ARCHIVE,
                        metavar="DIR", help="the archive of committed records (default: "
                                            "the repository's reports/archive)")
    parser.add_argument("--no-archive", action="store_true",
                        help="leave the archive out: the local records alone")
    parser.add_argument("--out", type=Path, default=Path("reports/site"), metavar="DIR",
                        help="where the site goes (default: %(default)s): a new or empty folder, or "
                             "a site that privboard report wrote, which is replaced whole; "
                             "any other folder is refused, never deleted")
    parser.add_argument("--tolerance", type=float, default=1.0,
                        help="mark differences from the paper beyond this many accuracy "
                             "points (RMSE: a hundredth of it) (default: %(default)s)")
    parser.add_argument("--show-superseded", action="store_true",
                        help="also show records whose configuration is in no current "
                             "suite (flagged as superseded)")


def run(args: argparse.Namespace) -> int:
    given = args.results or ([DEFAULT_RESULTS] if DEFAULT_RESULTS.is_dir() else [])
    archive = None if args.no_archive else args.archive
    if archive is None and not given:
        raise ReportError(f"no records to report: no archive and no {DEFAULT_RESULTS}/ "
                          f"folder (give --results DIR)")
    submissions = [bundle.load(folder) for folder in given if bundle.is_bundle(folder)]
    results = [folder for folder in given if not bundle.is_bundle(folder)]
    index = build(results, args.out, args.tolerance, show_superseded=args.show_superseded,
                  archive=archive, submissions=submissions)
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
