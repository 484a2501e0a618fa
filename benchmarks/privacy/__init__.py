"""Privacy accounting in one place: notions as types, the run's ledger, and the RDP
arithmetic (through dp_accounting) that the ledger and the calibrations share."""
from benchmarks.privacy.ledger import (Charge, Ledger, PureEpsilon, RdpCurve, SampledGaussian,
                                       Total, Touches, Unprotected, inputs, labels, records)
from benchmarks.privacy.notions import (LABEL_DP_PURE, NON_PRIVATE, Accountant, Field, Kind,
                                        Neighbours, PrivacyNotion, Protects)

__all__ = ["Accountant", "Charge", "Field", "Kind", "LABEL_DP_PURE", "Ledger", "NON_PRIVATE",
           "Neighbours", "PrivacyNotion", "Protects", "PureEpsilon", "RdpCurve",
           "SampledGaussian", "Total", "Touches", "Unprotected", "inputs", "labels", "records"]
