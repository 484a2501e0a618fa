"""``privboard submit``: a method from another package reaches the leaderboard only with
its privacy claim checked. One module per concern:

- ``contract_checks``: the method contract's checks, run on every registered method by
  the contract tests and on a submitted one by ``submit``;
- ``ledger_watch``: which of the privacy layer's mechanisms a fit ran, and who charged
  the run's ledger;
- ``library_watch``: what the known outside DP libraries ran, step by step, composed,
  and what the watch cannot see, refused; its hooks on each library are
  ``opacus_watch`` and ``tf_privacy_watch``;
- ``library_replay``: the noisy gradients of their steps, recorded in one fit and handed
  back in a fit on altered private data (the replay check of a library's fit);
- ``submit``: the command, its cells and the checks of their records;
- ``bundle``: what it writes, and what ``privboard report --results`` reads.

The method-facing API (``benchmarks.contract``, ``benchmarks.privacy``) lives outside.
"""
