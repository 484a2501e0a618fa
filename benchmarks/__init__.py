"""privboard's harness: registry, datasets, suites, runner, result store and CLI."""
import os

# What a run's numbers depend on bit for bit besides its code, seed, data and threads,
# set here, before TensorFlow's first op and before numpy loads (a user's own setting
# wins; every record says which ran: provenance.onednn, onednn_isa, openblas):
# - oneDNN's kernels in every run, whatever the CPU. TensorFlow turns them on by default
#   only on CPUs with AVX-512, results differ bit for bit with and without them, and
#   PATE's stacked teachers need their grouped convolutions (the other CPU kernels have
#   no gradient for those).
# - oneDNN and OpenBLAS choose their kernels by the CPU's instruction set, and their
#   AVX-512 kernels add in another order than the AVX2 ones. Capped at AVX2 (OpenBLAS's
#   Haswell kernels), every x86-64 CPU with AVX2 computes the same bits.
NUMERICS_VARIABLES = {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2",
                      "OPENBLAS_CORETYPE": "Haswell"}
for _name, _value in NUMERICS_VARIABLES.items():
    os.environ.setdefault(_name, _value)
