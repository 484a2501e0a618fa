"""Empirical privacy audits of a trained method in one run with canaries (``canaries``,
``one_run``, ``training``), and of its Gaussian releases' claimed trade-off curves
(``claim_audit``, ``dp_sgd_release``). The statistical lower bounds on epsilon, the test
of a claimed curve and the audits of the mechanisms alone are the privacy layer's
(benchmarks.privacy.audit_bounds, one_run_fdp and mechanism_audit).

An audit can only show that a mechanism is *not* as private as claimed; a lower bound at or
below the claim, or a claim not rejected, is consistent with the claim, not a proof of it.
"""
