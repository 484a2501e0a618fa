"""Empirical privacy audits of a trained method in one run with canaries (``canaries``,
``one_run``, ``training``). The statistical lower bounds on epsilon and the audits of the
mechanisms alone are the privacy layer's (benchmarks.privacy.audit_bounds and
benchmarks.privacy.mechanism_audit).

An audit can only show that a mechanism is *not* as private as claimed; a lower bound at or
below the claim is consistent with the claim, not a proof of it.
"""
