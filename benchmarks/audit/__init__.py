"""Empirical privacy audits: statistical lower bounds on epsilon (``bounds``), audits of the
privacy mechanisms on worst-case neighbouring inputs (``mechanisms``), and audits of a
trained method in one run with canaries (``canaries``, ``one_run``, ``training``).

An audit can only show that a mechanism is *not* as private as claimed; a lower bound at or
below the claim is consistent with the claim, not a proof of it.
"""
