"""Library pytrees under markers: the fields a class keeps static (callables,
strings, configuration) are never leaves, so no marker reaches them."""

import equinox as eqx
import optax
from flax.core import FrozenDict
from flax.training.train_state import TrainState

from treespec import Donate, Dynamic


class MLP(eqx.Module):
    first: eqx.nn.Linear
    second: eqx.nn.Linear


def layers(lin: Dynamic[eqx.nn.Linear], conv: Dynamic[eqx.nn.Conv2d]) -> None: ...


def update(model: Donate[MLP], state: Donate[TrainState]) -> None: ...


def frozen(
    params: Dynamic[FrozenDict],  # pyright: ignore[reportMissingTypeArgument]
    typed: Dynamic[FrozenDict[str, float]],
) -> None: ...


def optimiser(opt_state: Donate[optax.OptState]) -> None: ...
