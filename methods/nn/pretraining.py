"""Non-private pre-training on a public dataset, then a fresh head for the private task:
the CIFAR-100 -> CIFAR-10 settings of Abadi et al. 2016 (DP-SGD) and Ghazi et al. 2021
(the "pt" rows of LP-1ST and LP-2ST). The pre-trained weights are a function of the
public set alone, so the private set's guarantee is unaffected; the public set's
examples are not protected."""
from __future__ import annotations

from typing import Callable

import tensorflow as tf

from benchmarks.context import RunContext
from benchmarks.errors import InputError
from methods.nn import models, training


def pretrained(context: RunContext, source: str, model: str, input_shape: tuple[int, ...],
               num_classes: int, *, norm: str | None, epochs: int, batch_size: int,
               peak_lr: float, augment: bool,
               progress: Callable[[str], None]) -> tf.keras.Model:
    """``model`` trained on the public ``source`` (loaded through the run's context, so
    its fingerprint is recorded), with its head replaced by a fresh one of
    ``num_classes`` logits."""
    public = context.load(source)
    if public.train.x.shape[1:] != tuple(input_shape):
        raise InputError(f"pretrain set {source} has inputs of shape "
                         f"{public.train.x.shape[1:]}, the private set {tuple(input_shape)}")
    network = models.build(model, input_shape, public.num_classes, norm=norm)
    training.fit(network, public.train.x, public.train.y, public.num_classes,
                 epochs=int(epochs), batch_size=int(batch_size), peak_lr=float(peak_lr),
                 warmup=0.1, momentum=0.9, weight_decay=0.0, mixup_alpha=0.0,
                 augment=augment, seed=context.seed_for("pre-training"),
                 progress=progress, label=f"pretrain {source}: ")
    features = network.layers[-1].input
    head = tf.keras.layers.Dense(num_classes, name="private_head")(features)
    return tf.keras.Model(network.input, head, name=f"{network.name}_finetune")
