"""The watch of Opacus (library_watch): hooks on its DP optimizers' clipping and noise,
on its Poisson sampler and on ghost clipping's loss, for the length of a fit. Each noisy
step is measured as it runs (library_watch's docstring says how), and its noisy gradient
is recorded, or replaced by the recorded one, right as add_noise made it
(library_replay): everything after the noise (scaling, the step) runs again in a
replay."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import weakref

import numpy as np

from benchmarks.submission.library_watch import OPACUS, Ran, Setting, patch, refusal


@dataclasses.dataclass
class _Sum:
    """What went into an Opacus optimizer's clipped sum since its last noisy step."""

    examples: int = 0
    clips: list[float] = dataclasses.field(default_factory=list)


def watch(ran: Ran, stack: contextlib.ExitStack) -> None:
    """Watch Opacus' steps into ``ran`` until ``stack`` closes."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook
    from opacus.grad_sample.grad_sample_module_fast_gradient_clipping import (
        GradSampleHooksFastGradientClipping)
    from opacus.optimizers import optimizer as flat
    from opacus.optimizers import optimizer_fast_gradient_clipping as ghost
    from opacus.utils.fast_gradient_clipping_utils import DPTensorFastGradientClipping
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    watched = (flat.DPOptimizer, ghost.DPOptimizerFastGradientClipping)
    sums: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # optimizer -> _Sum
    # optimizer -> (examples, clipping norm, gradients) of its last ghost-clipped backward
    ghost_clipped: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    # optimizer -> its noisy gradients, until the optimizer it wraps steps
    noised: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    wrapped: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # inner -> DP optimizer
    draws: list[tuple[int, float, int]] = []  # Poisson draws since the last noisy step
    stds: list[float] = []  # the noise drawn in the add_noise under way
    coefficients: list[tuple[int, float]] = []  # ghost clipping's, in the backward under way

    def seen(optimizer) -> _Sum:
        """The optimizer's running sum, once its class is checked."""
        refused = refusal(optimizer, watched, OPACUS, {})
        if refused:
            ran.refuse(refused)
        wrapped[optimizer.original_optimizer] = optimizer
        return sums.setdefault(optimizer, _Sum())

    def init(original):
        def watched_init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            seen(self)
        return watched_init

    def sampler_iter(original):
        def watched_iter(self):
            for indices in original(self):
                if type(self) is UniformWithReplacementSampler:  # what it drew with
                    draws.append((len(indices), ran.number(self.sample_rate, "the rate of "
                                  "Opacus' Poisson sampler"), int(self.num_samples)))
                yield indices
        return watched_iter

    def clip_norm(owner) -> float:
        return ran.number(owner.max_grad_norm, f"the max_grad_norm of {type(owner).__name__}")

    def clip_and_accumulate(original):
        def watched_clip(self):
            total = seen(self)
            examples = len(self.grad_samples[0]) if self.params else 0
            clip = clip_norm(self)  # what the clipping below reads
            original(self)
            total.examples += examples
            total.clips.append(clip)
        return watched_clip

    def clipping_coef(original):
        def watched_coef(self):
            clip = clip_norm(self)
            coef = original(self)
            coefficients.append((len(coef), clip))
            return coef
        return watched_coef

    def ghost_backward(original):
        def watched_backward(self):
            coefficients.clear()
            original(self)
            if len(coefficients) == 1:
                ghost_clipped[self.optimizer] = (*coefficients[0], [
                    None if p.grad is None else p.grad.detach().clone()
                    for p in self.optimizer.params])
        return watched_backward

    def accumulate(original):
        def watched_accumulate(self):
            total = seen(self)
            clipped = ghost_clipped.pop(self, None)
            if clipped is None or not all(map(_same, (p.grad for p in self.params),
                                              clipped[2])):
                ran.refuse(f"{type(self).__name__} noised a gradient that its ghost-clipping "
                           f"loss did not clip")
            else:
                total.examples += clipped[0]
                total.clips.append(clipped[1])
            original(self)
        return watched_accumulate

    def generate_noise(original):
        def watched_noise(std, *args, **kwargs):
            stds.append(ran.number(std, "the standard deviation of Opacus' noise"))
            return original(std, *args, **kwargs)
        return watched_noise

    def add_noise(original):
        def watched_add_noise(self):
            total = seen(self)
            if "_adjusted_noise_multiplier" in vars(self):
                ran.refuse(f"Opacus' adaptive clipping (an adjusted noise multiplier on "
                           f"{type(self).__name__}) is not watched")
            clipped = [p.summed_grad.detach().clone() for p in self.params]
            stds.clear()
            original(self)
            noisy = [p.grad.detach().clone() for p in self.params]
            std = min(stds, default=0.0)
            ran.added_noise(OPACUS, std, np.concatenate([
                (now - then.view_as(now)).cpu().numpy().ravel()
                for now, then in zip(noisy, clipped)]))
            if ran.tape is not None:
                noisy = replayed(self.params, noisy)
            noised[self] = noisy
            if not total.clips:
                ran.refuse(f"{type(self).__name__} noised a sum that Opacus did not clip")
            clip = max(total.clips, default=0.0)
            rate, draws_summed = poisson_draws(total.examples)
            sensitivity = draws_summed * clip
            ran.step(Setting(OPACUS, std / sensitivity if clip > 0 else math.inf, sensitivity,
                             total.examples, total.examples, rate))
            sums[self] = _Sum()
            draws.clear()
        return watched_add_noise

    def replayed(params: list, noisy: list) -> list:
        """The noisy gradients of a step through the tape: recorded, or replaced by the
        recorded ones (in each parameter's ``grad``)."""
        import torch

        handed = ran.tape.noised(OPACUS, [gradient.cpu().numpy() for gradient in noisy])
        for p, value, gradient in zip(params, handed, noisy):
            p.grad = torch.from_numpy(value).to(gradient.device)
        return [p.grad.detach().clone() for p in params]

    def poisson_draws(examples: int) -> tuple[float | None, int]:
        """(the step's rate, the draws summed into it) when its examples are those Opacus'
        Poisson sampler drew since the last step, at one rate from one population (k
        draws at rate q: one at 1 - (1 - q)^k, an example in it up to k times); else
        (None, 1)."""
        if not draws or sum(size for size, _, _ in draws) != examples or \
                len({(rate, population) for _, rate, population in draws}) != 1:
            return None, 1
        _, rate, population = draws[0]
        smallest = min(ran.train_sizes, default=population)
        once = min(1.0, rate * max(1.0, population / smallest))
        return 1.0 - (1.0 - once) ** len(draws), len(draws)

    def before_step(optimizer, args, kwargs) -> None:
        """Before any optimizer steps: one that a watched DP optimizer wraps steps right
        after that optimizer's noisy step, on its noised gradient (scaled), with no
        step pre-hook of its own that could change it."""
        dp = wrapped.get(optimizer)
        if dp is None:
            return
        noisy, name = noised.pop(dp, None), type(dp).__name__
        if noisy is None:
            ran.refuse(f"the optimizer that {name} wraps stepped without its noise")
        elif optimizer._optimizer_step_pre_hooks:
            ran.refuse(f"a step pre-hook of the optimizer that {name} wraps")
        elif not _scaled([p.grad for p in dp.params], noisy):
            ran.refuse(f"a hook changed the gradient that {name} noised before the step")

    patch(stack, flat.DPOptimizer, "__init__", init)
    patch(stack, UniformWithReplacementSampler, "__iter__", sampler_iter)
    patch(stack, flat.DPOptimizer, "clip_and_accumulate", clip_and_accumulate)
    patch(stack, GradSampleHooksFastGradientClipping, "get_clipping_coef", clipping_coef)
    patch(stack, DPTensorFastGradientClipping, "backward", ghost_backward)
    patch(stack, ghost.DPOptimizerFastGradientClipping, "accumulate", accumulate)
    for module in (flat, ghost):
        patch(stack, module, "_generate_noise", generate_noise)
    for cls in watched:
        patch(stack, cls, "add_noise", add_noise)
    stack.callback(register_optimizer_step_pre_hook(before_step).remove)


def _same(now, then) -> bool:
    """Two gradients (None when a parameter has none) are the same tensor values."""
    import torch

    return (now is None and then is None) or (
        now is not None and then is not None and torch.equal(now, then))


def _scaled(now: list, noisy: list) -> bool:
    """Whether the gradients ``now`` are one positive multiple of ``noisy`` (Opacus scales
    its noisy sum by the batch size), as they are when nothing changed them since."""
    import torch

    if any(gradient is None for gradient in now):
        return False
    a = torch.cat([gradient.detach().reshape(-1) for gradient in now])
    b = torch.cat([gradient.reshape(-1) for gradient in noisy])
    if not b.any():
        return not a.any()
    scale = torch.dot(a, b) / torch.dot(b, b)
    return bool(scale > 0) and torch.allclose(a, scale * b, rtol=1e-4, atol=0.0)
