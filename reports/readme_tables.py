"""The README's section on our archived results, generated from the archive alone: the
leaderboard's rows that hold a number of ours (the rows.md export, cut to those rows), and
per suite how many cells it holds, how long they trained here and how to run it again.

``python -m reports.readme_tables`` rewrites the section of README.md between its two
markers; the tests check that the README holds what this module generates.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks import archive as archive_store
from reports.rows import NOT_RANKED

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- archive-tables:start -->", "<!-- archive-tables:end -->"


def section(archive: Path = archive_store.ARCHIVE) -> str:
    """The generated text between the markers."""
    return "\n".join(["", _suite_times(archive), "", _headline_rows(archive), ""])


def _suite_times(archive: Path) -> str:
    lines = ["| suite | records | seeds | summed training time | machine | command |",
             "|---|---|---|---|---|---|"]
    for name in archive_store.suites(archive):
        manifest = archive_store.read_manifest(archive / name)
        entries = list(manifest["records"].values())
        seeds = sorted({entry["seed"] for entry in entries})
        seconds = sum(entry["wall_time_s"] or 0.0 for entry in entries)
        machines = sorted({f"{m['cpu']}, {m['cores']} cores, {m['threads']} thread(s) a cell, "
                           f"TensorFlow {m['tensorflow']} on {m['device']}"
                           for m in (entry["machine"] for entry in entries)})
        lines.append(f"| {name} | {len(entries)} | {', '.join(map(str, seeds))} | "
                     f"{_duration(seconds)} | {'; '.join(machines)} | `{manifest['command']}` |")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"


def _headline_rows(archive: Path) -> str:
    """The rows.md lines of the site built from the archive alone that hold our numbers
    (but the smoke suite's)."""
    import reports

    with tempfile.TemporaryDirectory() as folder:
        site = Path(folder) / "site"
        reports.build(None, site, archive=archive)
        header, rule, *rows = (site / "rows.md").read_text().splitlines()
    names = [cell.strip() for cell in header.split("|")]
    ours, suite = names.index("ours"), names.index("suite")
    kept = [row for row in rows if row.split("|")[ours].strip()
            and row.split("|")[suite].strip() not in NOT_RANKED]
    return "\n".join([header, rule, *kept])


def rewrite(readme: Path = README, archive: Path = archive_store.ARCHIVE) -> bool:
    """Put the generated section into ``readme``; whether it changed."""
    text = readme.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{readme} has no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    new = head + START + section(archive) + END + rest.split(END, 1)[1]
    readme.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reports.readme_tables",
        description="Rewrite the README's tables of our archived results from the archive.")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    changed = rewrite(args.readme)
    print(f"{args.readme}: {'updated' if changed else 'already current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
