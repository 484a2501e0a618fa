"""The ``privboard`` command. Listing, status, reporting and ``--help`` never import
TensorFlow or Ray; only ``run`` does, when the first cell trains, and ``doctor``."""
from __future__ import annotations

import benchmarks.numerics  # noqa: F401  (first: see benchmarks/numerics.py)

import argparse
import os
import sys
from pathlib import Path

# TensorFlow's C++ start-up messages (CUDA probing on a CPU machine) are noise here.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

DEFAULT_RESULTS = Path("results")


def _list(args: argparse.Namespace) -> int:
    from benchmarks import datasets
    from benchmarks.registry import all_methods
    from benchmarks.suites import load_suite, suite_names

    if args.what in ("methods", "all"):
        print("methods:")
        for name, cls in all_methods().items():
            print(f"  {name:<20} {cls.default_notion().short}; {cls.paper}")
    if args.what in ("datasets", "all"):
        print("datasets:")
        for name, spec in sorted(datasets.SPECS.items()):
            where = "offline" if spec.offline else "user-provided archive"
            print(f"  {name:<20} {spec.task}, {spec.num_classes} classes, {where}")
    if args.what in ("suites", "all"):
        print("suites:")
        for name in suite_names():
            suite = load_suite(name)
            print(f"  {name:<20} {len(suite.cells)} cells; {suite.description}")
    return 0


def _suite(args: argparse.Namespace):
    from benchmarks.suites import load_suite, parse_seeds

    return load_suite(args.suite, None if args.seeds is None else parse_seeds(args.seeds))


def _suite_flags(args: argparse.Namespace) -> str:
    return f"--suite {args.suite}" + (f" --seeds {args.seeds}" if args.seeds else "")


def _run(args: argparse.Namespace) -> int:
    from benchmarks import datasets, runner
    from benchmarks.suites import only_cells

    suite = _suite(args)
    if args.cells is not None:
        suite = only_cells(suite, args.cells)
    data_dir = args.data or datasets.data_dir()
    if args.dry_run:
        states = runner.plan(suite, args.results, data_dir)
        for cell, state in states:
            print(f"{cell.cell_id}  {cell.describe():<55} {state}")
        missing = sorted({(c.dataset, s.split(": ", 1)[1]) for c, s in states
                          if s.startswith("unavailable")})
        for name, why in missing:
            print(f"missing dataset {name}: {why}")
        print(f"{len(states)} cells, {sum(s == 'pending' for _, s in states)} pending")
        return 0
    from benchmarks.executors import executor_from

    failures = runner.run(suite, args.results, data_dir, retry_failed=args.retry_failed,
                          executor=executor_from(args))
    print(f"results in {args.results}/" + (f"; {failures} cell(s) failed, see "
                                           f"'privboard status {_suite_flags(args)}'"
                                           if failures else ""))
    return 1 if failures else 0


def _status(args: argparse.Namespace) -> int:
    from benchmarks import datasets, runner
    from benchmarks.records import read_records

    suite = _suite(args)
    states = runner.plan(suite, args.results, args.data or datasets.data_dir())
    counts: dict[str, int] = {}
    for _, state in states:
        key = state.split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    print(f"suite {suite.name}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    failed = {c.cell_id: c for c, s in states if s == "failed"}
    for record in read_records(args.results):
        if not record.ok and record.cell_id in failed:
            print(f"failed {failed[record.cell_id].describe()}: {record.error}")
    if failed:
        print(f"retry with: privboard run {_suite_flags(args)} --retry-failed")
    return 0


def _archive(args: argparse.Namespace) -> int:
    from benchmarks import archive, catalogue

    if args.suite:
        from benchmarks.suites import load_suite

        suite = _suite(args)
        added, kept = archive.add(suite, args.results, args.archive, own=load_suite(args.suite))
        print(f"archived {added} record(s) of suite {suite.name} from {args.results}/ "
              f"into {args.archive / suite.name}/ ({kept} were archived already)")
    path = catalogue.write(args.archive)
    print(f"catalogue written to {path}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from benchmarks import verify

    return verify.run(args)


def _submit(args: argparse.Namespace) -> int:
    from benchmarks.submission import submit

    return submit.run(args)


def _report(args: argparse.Namespace) -> int:
    import reports

    return reports.run(args)


def _data(args: argparse.Namespace) -> int:
    from benchmarks import datasets

    data_dir = args.data or datasets.data_dir()
    if args.action == "install":
        from benchmarks.datasets.install import install

        return install(data_dir)
    for name, state in datasets.status(data_dir):
        print(f"{name:<20} {state}")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from benchmarks import doctor

    return doctor.run(args)


def _privacy_dp_sgd(args: argparse.Namespace) -> int:
    from benchmarks.privacy import dp_sgd

    return dp_sgd.run(args)


def _privacy_pate(args: argparse.Namespace) -> int:
    from benchmarks.privacy import pate

    return pate.run(args)


def _audit_mechanism(args: argparse.Namespace) -> int:
    from benchmarks import registry
    from benchmarks.privacy import mechanism_audit

    registry.discover()  # a method module registers the audits of the mechanisms it adds
    return mechanism_audit.run(args)


class _ListsMechanisms(argparse.ArgumentParser):
    """The parser of `privboard audit mechanism`: its help lists the registered mechanisms,
    and method modules register the audits of the mechanisms they add, so only --help
    pays for discovering them."""

    def format_help(self) -> str:
        from benchmarks import registry
        from benchmarks.privacy import mechanism_audit

        registry.discover()
        self.epilog = "mechanisms: " + ", ".join(mechanism_audit.names())
        return super().format_help()


def _audit_training(args: argparse.Namespace) -> int:
    from benchmarks.audit import training

    return training.run(args)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="privboard", description=(
        "Reproducibility benchmarks and leaderboard for private machine learning."))
    p.set_defaults(interrupted="finished cells are saved, run again to resume")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ls = sub.add_parser("list", help="list methods, datasets and suites")
    ls.add_argument("what", nargs="?", default="all",
                    choices=["all", "methods", "datasets", "suites"])
    ls.set_defaults(func=_list)

    def with_results(cmd: argparse.ArgumentParser) -> None:
        cmd.add_argument("--results", type=Path, default=DEFAULT_RESULTS,
                         help="folder of run records (default: %(default)s)")

    def with_seeds(cmd: argparse.ArgumentParser) -> None:
        cmd.add_argument("--seeds", metavar="S,S,...",
                         help="run these seeds of every configuration instead of the "
                              "suite's own (e.g. 0,1,2)")

    def with_data(cmd: argparse.ArgumentParser) -> None:
        cmd.add_argument("--data", type=Path, default=None,
                         help="data folder (default: $PRIVBOARD_DATA or ~/.privboard/data)")

    run = sub.add_parser("run", help="run the cells of a suite that are not done yet")
    run.add_argument("--suite", required=True, help="suite name (see 'privboard list suites')")
    with_seeds(run)
    with_results(run)
    with_data(run)
    run.add_argument("--retry-failed", action="store_true", help="run failed cells again")
    run.add_argument("--cells", metavar="ID,ID,...",
                     help="only these cells of the suite (their cell identities, as "
                          "--dry-run lists them)")
    run.add_argument("--dry-run", action="store_true",
                     help="list the cells and their state, name missing datasets, run nothing")
    from benchmarks.executors import add_executor_arguments

    add_executor_arguments(run)
    run.set_defaults(func=_run)

    status = sub.add_parser("status", help="done, pending and failed cells of a suite")
    status.add_argument("--suite", required=True)
    with_seeds(status)
    with_results(status)
    with_data(status)
    status.set_defaults(func=_status)

    from benchmarks.archive import ARCHIVE

    archive = sub.add_parser(
        "archive", help="commit-ready copies of a suite's finished records, and the catalogue",
        description="Copy the public part of the finished records of a suite's cells from "
                    "a results folder into the archive (reports/archive/SUITE/), list each "
                    "in the suite's manifest with its commit, machine and digest, and write "
                    "the archive's catalogue. Records already archived are kept as they are.")
    archive.add_argument("--suite", help="the suite whose records to archive (without it, "
                                         "only the catalogue is written)")
    with_seeds(archive)
    with_results(archive)
    archive.add_argument("--archive", type=Path, default=ARCHIVE, metavar="DIR",
                         help="the archive folder (default: the repository's)")
    archive.set_defaults(func=_archive)

    verify = sub.add_parser(
        "verify", help="re-run a recorded cell from its record alone and compare",
        description="Train a recorded cell again from its record (method and version, "
                    "dataset fingerprint, budget, hyperparameters, seed and thread count) "
                    "and compare every public metric: 'identical', or 'different' with each "
                    "difference and its probable cause. Writes a verification record to the "
                    "results folder. Exit code 0 when identical, 1 when different.")
    verify.add_argument("cell", metavar="CELL_ID",
                        help="the cell identity (cell_id) of an archived or local record")
    with_results(verify)
    with_data(verify)
    verify.add_argument("--archive", type=Path, default=ARCHIVE, metavar="DIR",
                        help="the archive folder (default: the repository's)")
    verify.add_argument("--no-archive", action="store_true",
                        help="look for the cell in the results folder only")
    verify.set_defaults(func=_verify)

    submit = sub.add_parser(
        "submit", help="check a method from another package and bundle its results",
        description="Check a method that an installed package registers through the "
                    "privboard.methods entry point, and write a bundle that 'privboard "
                    "report --results BUNDLE' shows beside the archive: the method contract "
                    "on tiny data, the suite's cells of the method, an audit of each "
                    "private configuration at its notion (at the release too, where the "
                    "privacy layer's mechanisms ran), each record's epsilon against its "
                    "ledger's composition, and every mechanism of the layer against the "
                    "run's ledger. Exit code 0 when every check holds, 1 with one line "
                    "per failed check.")
    from benchmarks.submission.submit import add_arguments as add_submit_arguments

    add_submit_arguments(submit)
    with_seeds(submit)
    with_data(submit)
    submit.set_defaults(func=_submit, interrupted="no bundle was written (a bundle is "
                                                  "written whole at the end)")

    report = sub.add_parser("report", help="build the HTML leaderboard from run records")
    from reports import add_arguments as add_report_arguments

    add_report_arguments(report)
    report.set_defaults(func=_report)

    data = sub.add_parser("data", help="install the offline datasets, or show their state")
    data.add_argument("action", choices=["install", "status"])
    with_data(data)
    data.set_defaults(func=_data)

    doctor = sub.add_parser("doctor", help="versions, GPUs and verified datasets of this "
                                           "installation")
    with_data(doctor)
    doctor.set_defaults(func=_doctor)

    privacy = sub.add_parser("privacy", help="privacy calibration tools")
    psub = privacy.add_subparsers(dest="mechanism", required=True, metavar="MECHANISM")
    dpsgd = psub.add_parser("dp-sgd", help="noise multiplier for a DP-SGD (epsilon, delta) target")
    from benchmarks.privacy.dp_sgd import add_arguments

    add_arguments(dpsgd)
    dpsgd.set_defaults(func=_privacy_dp_sgd)
    pate = psub.add_parser("pate", help="data-independent and data-dependent epsilon of "
                                        "(Confident-)GNMax on your own teacher votes")
    from benchmarks.privacy.pate import add_arguments as add_pate_arguments

    add_pate_arguments(pate)
    pate.set_defaults(func=_privacy_pate)

    audit = sub.add_parser("audit", help="empirical lower bounds on epsilon", usage=(
        "%(prog)s --method M --dataset D --epsilon E [options]\n"
        "       %(prog)s mechanism NAME --epsilon E [options]"), description=(
        "Empirical lower bounds on epsilon: of a method trained once with canaries, or of "
        "one mechanism alone (privboard audit mechanism --help)."))
    from benchmarks.audit.training import add_arguments as add_training_audit_arguments

    add_training_audit_arguments(audit)
    audit.set_defaults(func=_audit_training)
    # Optional, so that the flags above audit a training run when no subcommand is given.
    asub = audit.add_subparsers(dest="what", required=False, metavar="WHAT", prog=audit.prog,
                                parser_class=_ListsMechanisms)
    mechanism = asub.add_parser("mechanism", help="audit one privacy mechanism alone on "
                                                  "worst-case neighbouring inputs")
    from benchmarks.privacy.mechanism_audit import add_arguments as add_audit_arguments

    add_audit_arguments(mechanism)
    mechanism.set_defaults(func=_audit_mechanism)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from benchmarks.errors import PrivboardError

    try:
        return args.func(args)
    except PrivboardError as err:
        print(f"privboard: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"privboard: interrupted; {args.interrupted}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
