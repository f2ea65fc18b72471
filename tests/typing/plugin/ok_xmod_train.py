"""Correct code using ok_xmod_models.py's classes under markers: no finding."""

import jax

from .ok_xmod_models import (
    Batch,
    Box,
    Config,
    DModel,
    FModel,
    FSettings,
    FStruct,
    Leaves,
    Lookup,
    Model,
    Registered,
    Settings,
)
from treespec import Donate, Dynamic, Static


def step(
    m: Dynamic[Model],
    f: Donate[FModel],
    s: Dynamic[FStruct],
    d: Dynamic[DModel],
) -> None: ...


def configure(
    a: Static[Settings], b: Static[FSettings], t: Static[Lookup]
) -> None: ...


def inner_markers(
    batch: Dynamic[Batch],
    cfg: Dynamic[Config],
    box: Dynamic[Box[jax.Array]],
    leaves: Static[Leaves],
) -> None: ...


def opaque(r: Dynamic[Registered], q: Static[Registered]) -> None: ...
