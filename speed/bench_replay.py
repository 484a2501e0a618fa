"""What the contract's replay check costs against one fit, per registered method.

For each method (all registered ones, or those named), fits the contract's tiny data
as the contract tests do, twice (the first fit of a method also pays for imports and
graph tracing; the second is timed), then runs the replay check (benchmarks.
submission.contract_checks.check_replays: one more fit on altered private data, the
layer handing back the first fit's releases and the watched DP libraries' steps its
noisy gradients), watched as submit watches it. Prints the timed fit, the replay check,
their ratio and the check's outcome. ``--import`` imports a module of methods first,
such as a plugin's on the PYTHONPATH.

    python -m speed.bench_replay
    python -m speed.bench_replay lp-1st dp-sgd
    PYTHONPATH=examples/opacus-plugin:examples/tfp-keras-plugin python -m speed.bench_replay \
        --import opacus_plugin --import tfp_keras_plugin opacus-mlp tfp-keras-mlp
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time

from benchmarks.registry import all_methods
from benchmarks.submission import contract_checks, library_watch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.bench_replay",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("methods", nargs="*", help="method names (default: every one)")
    parser.add_argument("--import", dest="modules", action="append", default=[],
                        metavar="MODULE", help="a module of methods to import first")
    args = parser.parse_args(argv)
    for module in args.modules:
        importlib.import_module(module)
    library_watch.import_installed()  # as submit does: a library is watched once imported
    methods = all_methods()
    unknown = sorted(set(args.methods) - set(methods))
    if unknown:
        sys.exit(f"bench_replay: unknown method(s) {', '.join(unknown)}")
    print(f"{'method':<24} {'fit s':>7} {'replay s':>9} {'ratio':>6}  outcome")
    fits = replays = 0.0
    for name in args.methods or sorted(methods):
        contract_checks.fit(methods[name])
        fitted = contract_checks.fit(methods[name])
        start = time.perf_counter()
        try:
            outcome = contract_checks.check_replays(fitted)
        except contract_checks.ContractBreach as err:
            outcome = f"FLAGGED {err}"
        replay = time.perf_counter() - start
        fits, replays = fits + fitted.seconds, replays + replay
        print(f"{name:<24} {fitted.seconds:7.1f} {replay:9.1f} "
              f"{replay / fitted.seconds:6.2f}  {outcome}", flush=True)
    print(f"\nall: fits {fits:.0f} s, replay checks {replays:.0f} s "
          f"({replays / max(fits, 1e-9):.2f} of a fit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
