"""privboard's harness: registry, datasets, suites, runner, result store and CLI."""
import os

# oneDNN's kernels in every run, whatever the CPU. TensorFlow turns them on by default
# only on CPUs with AVX-512, results differ bit for bit with and without them, and PATE's
# stacked teachers need their grouped convolutions (the other CPU kernels have no
# gradient for those). Set before TensorFlow loads; a user's own setting wins, and every
# record says which ran (provenance.onednn).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
