"""Keras building blocks shared by methods: model builders and the training loop.

This subpackage imports TensorFlow, so the registry's discovery skips it; method
modules import it inside their fit functions.
"""
import tensorflow as tf

# Retracing and autograph notices from Keras' predict loop are not actionable for users.
tf.get_logger().setLevel("ERROR")
