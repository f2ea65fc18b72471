"""JAX's shape errors read back as the sizes they set against each other:
`but c // 4 != g`, the two shapes of a broadcast, a dot or an update (`got
(a, b) and (a, c)`), a layer's own check (Equinox's `shape=(...) and
x.shape=(...)`), a loop's carry, a `vmap`'s axes, an einsum's labels
(`readings.by_labels`), and a `ValidationError`'s bindings against the
value it got."""

from __future__ import annotations

import re

__all__ = ["bound_against_value", "by_labels", "unequal_sizes"]


#: Where a message of JAX's names two shapes it found unequal.
_SHAPES = re.compile(r"(?:shapes for broadcasting: |got )\(")
#: JAX's listing of the shapes of an operation of three (`x * r * scale`).
_LISTED = re.compile(r"shapes for broadcasting: shapes=\[\(")


#: A layer's check of its own that names both shapes: Equinox's
#: "Received `shape=(latent_dim,) and `x.shape=(d_lat,)`".
_RECEIVED = re.compile(r"\bshape=\(([^()]*)\)\W{1,8}and\W{1,8}x\.shape=\(([^()]*)\)")

#: A loop's carry, or a `cond`'s branch, that comes out another shape (`has
#: type float32[b,s,c] but the corresponding output carry component has type
#: float32[b,stoch,classes]`); never a size with a comma (`floordiv(n, 2)`).
_CARRIED = re.compile(
    r"has type \w+\[([^\]()]*)\] but the corresponding output"
    r"(?: carry component| of \w+) has type \w+\[([^\]()]*)\]"
)


#: A value set into, or broadcast to, an array of another shape (`input
#: type=float32[b,1,d] and requested type=float32[b,h,dh]`, `got update
#: shape (b, 1, d) for operand shape (b, s, hd)`): its shape, then theirs.
_SET_INTO = re.compile(
    r"input type=\w+\[([^\]()]*)\] and requested type=\w+\[([^\]()]*)\]"
    r"|update shape \(([^()]*)\) for operand shape \(([^()]*)\)"
)
#: Two arrays concatenated (two only), less the axis they are joined along.
_JOINED = re.compile(
    r"concatenating along dimension (\d+) for shapes \(([^()]*)\), \(([^()]*)\)(?!, \()"
)


#: A vector reshaped into another shape: to broadcast against an array (a
#: norm's scale of a constructor's width over `[b, n, d]`: `cannot reshape
#: array of shape (latent_dim,) (size latent_dim) into shape [1, 1, d]`), or
#: a flat table over several axes (`(n_pos,) (size n_pos) into shape (t, d)
#: (size d*t)`): its one size against the new shape's.
_RESHAPED = re.compile(
    r"cannot reshape array of shape \((\w+),\) \(size \w+\) "
    r"into shape [\[(]([^\])]*)[\])]"
    r"(?: \(size ([^()]+(?:\([^()]*\)[^()]*)*)\))?"
)


#: The sizes of the axes a `vmap` maps that JAX found inconsistent (`most
#: axes (2 of them) had size n, e.g. axis 0 ...; * one axis had size m: ...`).
_MAPPED = re.compile(r"had size (.+?)(?:, e\.g\.|: axis)")

#: JAX's `..., but A != B.`, two sizes it needed equal.
_UNEQUAL = re.compile(r"\bbut ([^,;()]+?) != ([^,;()]+?)\.?(?= \(|$)")


#: One problem of a `ValidationError`: its annotation, bindings and value
#: (`expected Float[Array, 'b i'] with b bound by x, i=dx bound by w_x, got
#: float32[b,h + e]`).
_PROBLEM = re.compile(
    r"expected \w+\[[\w.]+, '([^']*)'\] with (.*?), got \w+\[([^\]]*)\]"
)


def _broadcast(shape: str) -> list[str]:
    """The one size of a shape that is not 1 (`1, 1, d`: `["d"]`), else []."""
    sizes = [size.strip() for size in shape.split(",") if size.strip() != "1"]
    return sizes if len(sizes) == 1 else []


def bound_against_value(text: str) -> list[list[tuple[str, str]]]:
    """For each problem of a `ValidationError`, the sizes its annotation's
    names were bound to (by another leaf: a nested call's `w_x`, an
    instance's field), or the names, against the value's, where they
    differ; where a name is not plain (`*b`, `...`, `h//2`), each binding
    against the name it binds; none where plain names meet a value of
    another rank, which no size makes right."""
    found = []
    for written, bindings, shape in _PROBLEM.findall(text):
        bound = dict(re.findall(r"(\w+)=(\w+) bound by", bindings))
        tokens, sizes = written.split(), [d.strip() for d in shape.split(",")]
        if not all(t.isidentifier() or t.isdigit() for t in tokens):
            found.append([(size, name) for name, size in bound.items()])
            continue  # `*b`, `...`, `h//2`: the ranks may differ
        if len(tokens) != len(sizes):
            found.append([])  # `"b i"` given `[b,s,d]`: a wrong rank
            continue
        pairs = [(bound.get(token, token), size) for token, size in zip(tokens, sizes)]
        found.append([(a, b) for a, b in pairs if a != b])
    return found


def unequal_sizes(text: str, listed: bool = False) -> list[tuple[str, str]]:
    """The sizes a shape error of JAX's says differ, in pairs: `but A != B`
    (`c // 1` read as `c`), or the two shapes it names (`got (a, b) and
    (a, c)`: `("b", "c")`), aligned from the last dimension, equal pairs
    left out; with `listed`, the first two of those it lists too
    (`shapes=[(b, 1, d), (d_model,)]`)."""
    if (labelled := by_labels(text)) is not None:  # an einsum's, label by label
        return labelled
    listing = _LISTED.search(text) if listed else None  # then the pair
    unequal = None if listing else _UNEQUAL.search(text)
    carried = None if listing else _CARRIED.search(text)
    received = None if listing else _RECEIVED.search(text) or carried
    received = received or (None if listing else _SET_INTO.search(text))
    if unequal:  # JAX's `but c // 4 != g`: one size each side (`c // 1` is c)
        groups = [[re.sub(r"\s*//\s*1$", "", side)] for side in unequal.groups()]
        grouped = re.fullmatch(r"(\w+) // (\w+)", groups[0][0])
        if grouped and groups[1] == ["1"]:  # `c // in_channels != 1`: c is it
            groups = [[grouped[1]], [grouped[2]]]
    elif received:  # a layer's own check (`shape == x.shape`), a loop's carry
        groups = [
            [size.strip() for size in side.split(",") if size.strip()]
            for side in received.groups()
            if side is not None
        ]
    elif joined := (None if listing else _JOINED.search(text)):
        axis, *sides = joined.groups()
        groups = [[size.strip() for size in side.split(",")] for side in sides]
        if len(groups[0]) != len(groups[1]) or len(groups[0]) <= int(axis):
            return []
        for group in groups:  # the axis they are joined along may differ
            del group[int(axis)]
    elif (reshaped := _RESHAPED.search(text)) and (
        new := [reshaped[3]] if reshaped[3] else _broadcast(reshaped[2])
    ):
        groups = [[reshaped[1]], new]
    elif "vmap got inconsistent sizes" in text:  # the sizes of a vmap's axes
        groups = [[size] for size in dict.fromkeys(_MAPPED.findall(text))]
    elif found := (listing or _SHAPES.search(text)):
        groups = _groups(text[found.end() - 1 :], 2)
    else:
        return []
    if len(groups) != 2 or (carried and len(groups[0]) != len(groups[1])):
        return []  # a carry of another rank: no axis is another's
    pairs = zip(reversed(groups[0]), reversed(groups[1]))
    return [(a, b) for a, b in pairs if a != b]


def _groups(text: str, count: int) -> list[list[str]]:
    """The first `count` parenthesized shapes of `text`, split at their
    top-level commas: `(a, floordiv(h, 2))` -> `['a', 'floordiv(h, 2)']`."""
    groups: list[list[str]] = []
    depth, start = 0, 0
    items: list[str] = []
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
            if depth == 1:
                start, items = i + 1, []
        elif char == ")":
            depth -= 1
            if depth == 0:
                items.append(text[start:i].strip())
                groups.append([item for item in items if item])
                if len(groups) == count:
                    break
        elif char == "," and depth == 1:
            items.append(text[start:i].strip())
            start = i + 1
    return groups


#: JAX's einsum, its operands' shapes with their labels (`lhs.shape=(b, ni,
#: di) lhs_names=bid rhs.shape=(in_caps, out_caps, out_dim, in_dim)
#: rhs_names=iojd`), and opt_einsum's path of one label (`Size of label 'm'
#: for operand 1 (7) does not match previous terms (19)`: operand 1's size,
#: then the earlier operands').
_LABELLED = re.compile(
    r"lhs\.shape=\(([^()]*)\) lhs_names=(\w+) rhs\.shape=\(([^()]*)\) rhs_names=(\w+)"
)
_LABEL = re.compile(
    r"Size of label '\w' for operand \d+ \(([^()]+)\) does not match "
    r"previous terms \(([^()]+)\)"
)


def by_labels(text: str) -> list[tuple[str, str]] | None:
    """The sizes an einsum pairs by its labels that differ (`("ni",
    "in_caps")`), or None where the text is no einsum's."""
    if label := _LABEL.search(text):
        return [(label[2].strip(), label[1].strip())]
    if not (found := _LABELLED.search(text)):
        return None
    lhs, lhs_names, rhs, rhs_names = found.groups()
    left, right = (
        [size.strip() for size in side.split(",") if size.strip()]  # `(n,)`
        for side in (lhs, rhs)
    )
    if len(left) != len(lhs_names) or len(right) != len(rhs_names):
        return None
    pairs = [
        (left[i], right[rhs_names.index(label)])
        for i, label in enumerate(lhs_names)
        if label in rhs_names
    ]
    return [(a, b) for a, b in pairs if a != b]
