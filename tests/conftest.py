import os

# Quiet TensorFlow's start-up noise in test output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
