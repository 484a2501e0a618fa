"""The environment a run's numbers depend on, set when this module is first imported.

Every entry point imports it first (the command line, the local workers, Ray's tasks,
the package itself): another distribution may install a top-level ``benchmarks``
package of its own (Opacus 1.6 does), and where it comes first on the path, this
package's ``__init__`` never runs, while its modules still import.
"""
import os

# What a run's numbers depend on bit for bit besides its code, seed and data, set here,
# before TensorFlow's first op and before numpy loads (a user's own setting wins; every
# record says which ran: provenance.threads, onednn, onednn_isa, openblas):
# - One thread a cell, whatever runs it: TensorFlow's and numpy's reductions split their
#   work by thread, so a cell computed on two threads differs in the last digits from the
#   same cell on one. Every executor gives its cells this count (numpy's BLAS and oneDNN
#   read it when they load); a machine's cores are used by running cells side by side.
# - oneDNN's kernels in every run, whatever the CPU. TensorFlow turns them on by default
#   only on CPUs with AVX-512, results differ bit for bit with and without them, and
#   PATE's stacked teachers need their grouped convolutions (the other CPU kernels have
#   no gradient for those).
# - oneDNN and OpenBLAS choose their kernels by the CPU's instruction set, and their
#   AVX-512 kernels add in another order than the AVX2 ones. Capped at AVX2 (OpenBLAS's
#   Haswell kernels), every x86-64 CPU with AVX2 computes the same bits.
NUMERICS_VARIABLES = {"OMP_NUM_THREADS": "1", "TF_ENABLE_ONEDNN_OPTS": "1",
                      "ONEDNN_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell"}
for _name, _value in NUMERICS_VARIABLES.items():
    os.environ.setdefault(_name, _value)
