"""Replay of a fit through Opacus or tensorflow-privacy: the noisy gradients that the
watched steps released, recorded in one fit and handed back in another.

Watched with ``library_watch.watch(Steps())``, a fit keeps every noisy gradient its
watched steps release, in order, as the noise makes it: each parameter's noised sum in
Opacus' ``add_noise``, the noised gradients that tensorflow-privacy's Keras optimizers
return, and those that DPModel's train step noises, before it adds any regularisation
gradient. Watched with ``watch(Steps(recorded))``, a second fit gets the recorded
gradients in place of those its steps compute, whatever data they clipped; their number,
order and shapes must be the recorded ones. From a departure on, the fit goes on with
the gradients its steps compute, and the replay fails when the block ends (nothing is
raised inside a step, which the fit could catch). Everything after the noise runs
again, on whatever the second fit was given: when it is given altered private data
and predicts exactly as the first fit did, the first fit's model was a function of
what the watched steps released (and of public data) alone, whatever else it read.

A trace that XLA compiles cannot hand its gradients to Python: a fit that ran one is
not recorded (``cannot_record``), and not replayed.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np


class StepMismatch(Exception):
    """The replaying fit's noisy steps departed from the recorded fit's. Not an
    InputError: a method that handles bad input must not take it for one."""


@dataclasses.dataclass(frozen=True)
class Gradient:
    """One parameter's noisy gradient in one step."""

    library: str
    value: np.ndarray


class Steps:
    """The noisy gradients of one fit, in the order they were released; or, replaying
    ``recorded``, how far the replaying fit has followed them."""

    def __init__(self, recorded: Steps | None = None) -> None:
        self.recorded = recorded
        self.gradients: list[Gradient] = [] if recorded is None else recorded.gradients
        self.position = 0  # gradients handed back
        self.mismatch = ""  # the first departure from the recorded fit
        self.unrecorded: list[str] = []  # the steps that could not be recorded, each why

    @property
    def replaying(self) -> bool:
        return self.recorded is not None

    def noised(self, library: str, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        """One step's noisy gradients, one per parameter: recorded and returned, or,
        replaying, the recorded ones returned in their place (``values`` themselves from
        the first departure on)."""
        if not self.replaying:
            self.gradients += [Gradient(library, np.array(value)) for value in values]
            return list(values)
        handed = []
        for value in values:
            if not self.mismatch:
                self.mismatch = self._departure(library, value)
            if self.mismatch:
                return list(values)
            handed.append(self.gradients[self.position].value.copy())
            self.position += 1
        return handed

    def _departure(self, library: str, value: np.ndarray) -> str:
        """How the next noisy gradient departs from the recorded one, or ""."""
        where = f"noisy gradient {self.position + 1} ({library}, of shape {tuple(value.shape)})"
        if self.position >= len(self.gradients):
            return f"{where} came after the {len(self.gradients)} of the recorded fit"
        recorded = self.gradients[self.position]
        if (recorded.library, recorded.value.shape, recorded.value.dtype) != (
                library, value.shape, value.dtype):
            return (f"{where} came where the recorded fit released one of "
                    f"{recorded.library} of shape {tuple(recorded.value.shape)}")
        return ""

    def cannot_record(self, why: str) -> None:
        self.unrecorded.append(why)

    def libraries(self) -> list[str]:
        """The libraries whose gradients are on the tape, each once, in order."""
        return list(dict.fromkeys(gradient.library for gradient in self.gradients))

    def finish(self) -> None:
        """Raise StepMismatch unless the replaying fit took every recorded gradient, in
        order, and no other."""
        if self.replaying and not self.mismatch and self.position < len(self.gradients):
            self.mismatch = (f"the replayed fit released {self.position} of the "
                             f"{len(self.gradients)} noisy gradients of the recorded fit")
        if self.mismatch:
            raise StepMismatch(self.mismatch)
