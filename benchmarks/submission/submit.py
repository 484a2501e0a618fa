"""``privboard submit``: a method from another package reaches the leaderboard only with
its privacy claim checked.

The method is one an installed package registered through the ``privboard.methods``
entry point. The command

1. runs the method contract on the tiny data (contract_checks, the checks the tests run
   on privboard's own methods), the replay check among them: the method is refitted on
   altered private data with the first fit's releases of the privacy layer and the noisy
   gradients of its watched DP libraries' steps handed back (library_replay), and must
   predict exactly as before;
2. runs the suite's cells of the method (or, for a suite that names it nowhere, such as
   one of ours, the method with its defaults on the suite's datasets, epsilons and
   seeds), and an audited twin of each private configuration (benchmarks.audit.training:
   label canaries under label-DP, inclusion canaries under add/remove full DP; at the
   release too where the privacy layer's mechanisms released the canaries);
3. checks each record: the run finished, its epsilon is what its ledger's charges
   compose to, every mechanism of the privacy layer it ran charged the run's ledger
   (ledger_watch), what the known outside DP libraries ran (Opacus,
   tensorflow-privacy; library_watch) composes to no more than the record's
   epsilon, with the noise they added as their noise multiplier says, and no audit's
   bound exceeds the claim;
4. writes a bundle (bundle) with the records, the checks, the environment and the
   digests of the package's source files, and says whether the method is charged by
   construction (every charge made by the layer's mechanisms), charged as observed and
   replayed (its own charges are sampled Gaussians and a watched library's steps, as
   many as they charge, were composed against them in every cell that made one, and
   the replay check handed back those steps' noisy gradients) or self-accounted;
   and, of a run whose watched steps ran on shuffled batches, that they were accounted as
   Poisson samples with no proven bound (the record says so too).

A noisy step that the watch of the libraries cannot see stops it with one line, as bad
input does (library_watch.Unwatched).

The statistical checks of one submission are judged together at the family-wise level
of benchmarks.audit.levels (5%): its audited twins share most of it equally, each
twin's verdict split across its tests, and the watched libraries' noise checks the rest,
equally per cell (``levels.submission_levels``), so an honest method is refused by
chance at most 5% of the time however many configurations it runs. Exit code 0 when
every check holds, 1 with one line per failed check, 2 for bad input.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks import datasets, registry, runner
from benchmarks.audit import levels
from benchmarks.submission import bundle, contract_checks, library_watch
from benchmarks.contract import Method
from benchmarks.errors import InputError, one_line
from benchmarks.submission.ledger_watch import watch
from benchmarks.privacy import Ledger, SampledGaussian
from benchmarks.records import SAMPLING, SHUFFLED_BATCHES, RunRecord
from benchmarks.suites import Cell, Suite, load_suite, parse_seeds


@dataclasses.dataclass(frozen=True)
class Check:
    check: str
    scope: str  # the method contract and the check, or the cell it was made on
    line: str = ""  # the failure with its figure; "" when the check holds
    found: str = ""  # what a check that holds found, when it says (what it could replay)

    @property
    def passed(self) -> bool:
        return not self.line

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "scope": self.scope, "passed": self.passed,
                "line": f"{self.scope}: {self.line}" if self.line else "",
                "found": self.found}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", required=True,
                        help="the method, registered by an installed package through the "
                             f"{registry.ENTRY_POINT_GROUP} entry point")
    parser.add_argument("--suite", required=True,
                        help="a suite name or the path of a suite's TOML file: its cells of "
                             "the method run, or, when it names the method nowhere (a suite "
                             "of ours), the method on its datasets, epsilons and seeds")
    parser.add_argument("--out", type=Path, required=True, metavar="BUNDLE",
                        help="the bundle folder to write (an earlier bundle there is "
                             "replaced)")


def run(args: argparse.Namespace) -> int:
    method = registry.get_method(args.method)
    plugin = registry.plugin_of(method)
    if plugin is None:
        raise InputError(f"{args.method} is one of privboard's own methods "
                         f"({method.__module__}): privboard run runs it; submit takes a "
                         f"method that another package registers through the "
                         f"{registry.ENTRY_POINT_GROUP} entry point")
    bundle.check_writable(args.out)
    seeds = None if args.seeds is None else parse_seeds(args.seeds)
    library_watch.import_installed()
    suite = load_suite(args.suite, seeds)
    if not any(cell.method == method.name for cell in suite.cells):  # a suite of ours
        suite = load_suite(args.suite, seeds, grid_for=method.name)
    cells = cells_of(suite, method)
    data_dir = args.data or datasets.data_dir()
    for name in sorted({cell.dataset for cell in cells}):
        missing = datasets.get_spec(name).missing(data_dir)
        if missing:
            raise InputError(f"dataset {name} cannot be loaded here: {missing}")

    print(f"submitting {method.name} of {plugin.package} {plugin.version}: the method "
          f"contract, then {len(cells)} cell(s) of suite {suite.name}")
    outcomes, fitted = contract_checks.run_all(method)
    checks = [Check(name, f"the method contract ({name})", line, found)
              for name, line, found in outcomes]
    for check in checks:
        if check.found:  # such as what the replay check replayed, or why it could not
            print(f"{check.scope}: {check.found}")
    records: list[RunRecord] = []
    own_charges: list[str] = []
    observed: list[str] | None = None
    if all(check.passed for check in checks):
        records, cell_checks, own_charges, observed = run_cells(cells, data_dir)
        checks += cell_checks
    else:
        print("the method breaks the contract: its suite was not run")
    failed = [check for check in checks if not check.passed]
    accounting = bundle.NOT_RUN if not records else accounting_of(
        own_charges, observed, contract_checks.replayed_libraries(fitted),
        contract_checks.not_replayed(fitted),
        shuffled=any(record.no_proven_bound for record in records))
    bundle.write(args.out, {
        "method": method.name, "plugin": dataclasses.asdict(plugin),
        "source": bundle.source_digests(_package_dir(plugin)),
        "accounting": accounting, "own_charges": own_charges, "suite": suite.name,
        "command": f"privboard submit --method {method.name} --suite {args.suite}"
                   + (f" --seeds {args.seeds}" if args.seeds else ""),
        "checks": [check.as_dict() for check in checks], "passed": not failed,
        "environment": environment(plugin)}, records, suite)
    for check in failed:
        print(f"FAILED {check.as_dict()['line']}")
    if failed:
        print(f"submission refused: {len(failed)} of {len(checks)} checks failed (the "
              f"bundle {args.out}/ keeps them; privboard report refuses it)")
        return 1
    print(f"submission passed: all {len(checks)} checks held; {accounting}. Show it "
          f"beside the archive with: privboard report --results {args.out}")
    return 0


def accounting_of(own_charges: list[str], observed: list[str] | None, replayed: list[str],
                  not_replayed: str, shuffled: bool) -> str:
    """The mark of a submission whose suite ran: charged by construction (or not
    replayed, naming the releases that could not be) when it charged nothing itself;
    charged as observed and replayed when the own charges of every cell were covered by
    the steps of the ``observed`` watched libraries, and the contract's replay check
    handed back the noisy steps of each (``replayed``); else self-accounted. Runs on
    ``shuffled`` batches make any mark but self-accounted the one of shuffled batches."""
    if not own_charges:
        accounting = bundle.by_construction(not_replayed)
    elif observed and set(observed) <= set(replayed):
        accounting = bundle.charged_as_observed(observed)
    else:
        return bundle.SELF_ACCOUNTED
    if shuffled:
        return bundle.shuffled_batches(observed or [])  # never charged as observed
    return accounting


def cells_of(suite: Suite, method: type[Method]) -> list[Cell]:
    """The suite's cells of ``method`` that it can run, and an audited twin (the first
    seed) of each private configuration that the suite does not audit already."""
    cells = [cell for cell in suite.cells if cell.method == method.name and not cell.skip]
    if not cells:
        raise InputError(f"suite {suite.name} has no cells that {method.name} can run "
                         f"(its datasets: {', '.join(sorted({c.dataset for c in suite.cells}))})")
    audited = {cell.config_id for cell in cells if cell.audit}
    twins = {}
    for cell in cells:
        if not cell.audit and cell.config_id not in audited and \
                method.notion_for(cell.budget, cell.hparams).private:
            twins.setdefault(cell.config_id, dataclasses.replace(cell, audit=True))
    return cells + list(twins.values())


def run_cells(cells: list[Cell], data_dir: Path
              ) -> tuple[list[RunRecord], list[Check], list[str], list[str] | None]:
    """Run every cell in this process, each watched, the audited twins last: a twin of
    a configuration whose run failed is left out (its failure is already the reason).
    Returns (records, checks, the mechanisms the method charged itself, the watched
    libraries its own charges were checked against, or None when a cell's own charges
    were not all sampled Gaussians covered by a watched library's steps). A record whose
    watched steps took shuffled batches is marked so."""
    twin_level, library_level = levels.submission_levels(sum(cell.audit for cell in cells),
                                                         len(cells))
    slot = runner.DatasetSlot()
    records, checks, own, failed = [], [], [], set()
    observed: set[str] | None = set()
    with tqdm(total=len(cells), unit="cell", file=sys.stderr, dynamic_ncols=True) as bar:
        for cell in sorted(cells, key=lambda cell: cell.audit):
            if cell.audit and cell.config_id in failed:
                bar.update()
                continue
            context = runner.local_context(cell, data_dir, bar)
            data = slot.get(cell.dataset, data_dir)
            with watch() as seen:
                record = runner.run_cell(cell, data, context, audit_confidence=1 - twin_level)
            records.append(record)
            if not record.ok:
                failed.add(cell.config_id)
            elif seen.library.shuffled:
                record.privacy.details[SAMPLING] = SHUFFLED_BATCHES
            checks += cell_checks(cell, record, context.ledger, seen.uncharged(context.ledger))
            watched = library_checks(cell, record, context.ledger, seen.library, library_level)
            checks += watched
            mine = seen.own_charges(context.ledger)
            own += mine
            if mine and observed is not None:
                as_observed = (bool(watched) and all(check.passed for check in watched)
                               and covered(context.ledger, mine, seen.library))
                observed = observed | set(seen.library.libraries) if as_observed else None
            bar.update()
    return (records, checks, list(dict.fromkeys(own)),
            None if observed is None else sorted(observed))


def covered(ledger: Ledger, mine: list[str], library: library_watch.Ran) -> bool:
    """The method's own charges are sampled Gaussians of no more steps than the watched
    libraries were seen to run: none of them is for noise that nothing watched."""
    charges = [charge.cost for charge in ledger.charges if charge.mechanism in mine]
    return all(isinstance(cost, SampledGaussian) for cost in charges) and \
        sum(cost.steps for cost in charges) <= sum(library.steps.values())


def cell_checks(cell: Cell, record: RunRecord, ledger: Ledger,
                uncharged: list[str]) -> list[Check]:
    scope = cell.describe()
    if not record.ok:
        return [Check("runs", scope, record.error)]
    checks = [Check("runs", scope),
              Check("its epsilon is its ledger's composition", scope,
                    composition_line(record, ledger)),
              Check("every mechanism of the privacy layer charged the run's ledger", scope,
                    "; ".join(uncharged))]
    if record.is_audit:
        checks += audit_checks(record.audit, scope)
    return checks


def library_checks(cell: Cell, record: RunRecord, ledger: Ledger,
                   ran: library_watch.Ran, level: float) -> list[Check]:
    """When a watched library ran steps: they compose to no more than the record's
    epsilon, and the noise each step added is as its noise multiplier says (its checks
    together at ``level``)."""
    if not ran.steps or not record.ok:
        return []
    scope = cell.describe()
    charged = bool(ledger.relevant(record.privacy.notion))
    checks = [Check("what the watched DP libraries ran is charged", scope,
                    library_watch.compare(ran, record.privacy.epsilon, charged,
                                          record.delta))]
    noises = ran.noise_checks()
    each = level / max(1, len(noises))
    return checks + [Check(f"the noise {noise.mechanism} added is as its noise multiplier "
                           f"says", scope,
                           f"the noise {noise.mechanism} added is below its noise "
                           f"multiplier's ({noise.claim}): {noise.measured}, "
                           f"p = {noise.p_value:.3g} at level {100 * each:.3g}%"
                           if noise.flagged(each) else "")
                     for noise in noises]


def composition_line(record: RunRecord, ledger: Ledger) -> str:
    """"" when the record's (epsilon, delta) is what the ledger's charges compose to under
    its notion, else the two."""
    try:
        total = ledger.total(record.privacy.notion, record.delta)
    except Exception as err:  # noqa: BLE001 (a ledger that does not compose fails the check)
        return f"its ledger's charges do not compose: {one_line(err)}"
    claimed = (record.privacy.epsilon, record.privacy.delta)
    if all(math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0) or a == b
           for a, b in zip(claimed, (total.epsilon, total.delta))):
        return ""
    return (f"the record claims epsilon {claimed[0]:.6g}, delta {claimed[1]:g}, but its "
            f"ledger's charges compose to epsilon {total.epsilon:.6g}, delta "
            f"{total.delta:g}")


def audit_checks(audit: dict[str, Any], scope: str) -> list[Check]:
    """Each test of the audit's verdict at its level (benchmarks.audit.levels): each
    audited bound against the claim, the test of a Gaussian release's claimed curve, and
    each noise check."""
    claim, checks = audit["claimed_epsilon"], []
    for test in levels.judge(audit).tests:
        level = f"{100 * test.level:.3g}%"
        if test.test == levels.CLAIM:
            tested = audit["release"]["claim_test"]
            checks.append(Check("the claimed curve is not rejected at the release", scope,
                                f"the claimed curve ({tested['claim']}) is rejected at level "
                                f"{level} on {tested['canaries']} phantom canaries"
                                if test.rejects else ""))
        elif test.test == levels.NOISE:
            noise = next(c for c in audit["noise_checks"] if c["mechanism"] == test.detail)
            checks.append(Check(f"the noise of {noise['mechanism']} is as charged", scope,
                                f"the noise of {noise['mechanism']} is below its charge "
                                f"({noise['claim']}): {noise['measured']}, p = "
                                f"{noise['p_value']:.3g} at level {level}"
                                if test.rejects else ""))
        else:
            where = "from the model" if test.test == levels.MODEL else "at the release"
            checks.append(Check(f"the audit {where} stays within the claim", scope,
                                f"audited ε ≥ {test.bound:.3g} at {100 * (1 - test.level):.4g}% "
                                f"({where}) exceeds the claim {claim:g}"
                                if test.rejects else ""))
    return checks


def environment(plugin: registry.Plugin) -> dict[str, Any]:
    """Where the submission ran: privboard's commit, the packages, the machine and the
    thread settings (as every record's provenance), the plugin's package and the
    releases of the DP libraries privboard watched."""
    from benchmarks.tf_runtime import numerics

    return {**runner.provenance(numerics()), "privboard": runner.package_version("privboard"),
            "plugin": f"{plugin.package} {plugin.version}",
            "watched DP libraries": library_watch.installed()}


def _package_dir(plugin: registry.Plugin) -> Path:
    """The top-level package (or module) of the method's code: the files digested."""
    module = sys.modules[plugin.module]
    paths = getattr(module, "__path__", None)
    return Path(list(paths)[0]) if paths else Path(module.__file__)
