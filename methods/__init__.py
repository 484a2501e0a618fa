"""Methods: one file per method family, plus shared mechanisms and model builders.

Every module here is imported by ``benchmarks.registry.discover``; method modules must
not import TensorFlow at import time.
"""
