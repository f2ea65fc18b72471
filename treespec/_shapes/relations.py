"""What a shape check takes of the sizes no annotation of the function binds
(a constructor's, and the names instances bind in their own scopes,
`scopes.py`): the relations a failure shows the code needs of them, adopted
(the run made again, and said in a note); where no failure says it, each
set equal to a size the annotations name until the function runs
(`matched`)."""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from .._runtime.checking.dims import DIM_NAME
from .messages import bound_against_value, unequal_sizes
from .readings import by_names
from .scopes import SCOPED, InstanceScopes

__all__ = [
    "MAX_MATCHES",
    "MAX_RELATIONS",
    "matched",
    "needed_at",
    "relations_needed",
    "relations_text",
    "solved",
    "solved_or_matched",
    "with_relations",
]


#: What a size JAX writes may use besides names and numbers.
_OPERATIONS = {"floordiv": operator.floordiv, "mod": operator.mod}


def relations_needed(text: str, unknown: Collection[str] = ()) -> dict[str, str]:
    """What a failure says the code needs of sizes no annotation of the
    function names, by name: of an instance's own names (`got (in__1,) and
    (d,)`: in__1 must be d), and of the `unknown` ones, a constructor's size
    that no annotation names, where the body's own checks relate it to
    another size (`but c // 1 != channels`: channels must be c). Against
    the return annotation, only an instance's own name (no annotation can
    state it): there a constructor's size is the function's contract
    broken, a bug. Nor a number the body hard-codes."""
    found: dict[str, str] = {}
    body = unequal_sizes(text, listed=True)
    for a, b in [*body, *_annotation_against_shape(text)]:
        in_body = (a, b) in body
        if summed := _summands(a, b, unknown):  # `o + a` against a sum of two
            found.update((k, v) for k, v in summed.items() if k not in found)
            continue
        for name, other in ((a, b), (b, a)):
            if name in found or (in_body and other.strip().isdigit()):
                # A number the body hard-codes (`one_hot(y, 10)` against a
                # constructor's `num_classes`) is never a size to take: an
                # author builds a module to fit its input, not a constant in
                # its body (DESIGN). The failure stands, an error.
                continue
            if name in DIM_NAME.findall(other):
                # A size against a multiple of itself (`g` against `2*g`, a
                # concatenation along the wrong axis): no size of it fits.
                continue
            if SCOPED.fullmatch(name) or (in_body and name in unknown):
                found[name] = other
                break
    if "the return value" not in text:
        # An argument's dimension bound by an instance's field to a
        # constructor's size (`with c=channels bound by self.pos`, got
        # `[c,h,w]`): the author builds the instance to fit its input, so
        # channels is c, the value's size there (a nested call's own name
        # is not the caller's: `d_kv=memory_dim`, got `[b,s,e]`: e).
        for bound, size in itertools.chain(*bound_against_value(text)):
            if bound in unknown and bound not in found and not size.isdigit():
                found[bound] = size
    return found


def needed_at(
    text: str,
    sizes: dict[str, Any],
    relations: dict[str, str],
    unknown: Collection[str],
) -> dict[str, str]:
    """`relations_needed` of a failure at concrete `sizes`, its numbers read
    as the names of those sizes: a size related to a named one (`relations`)
    as that name."""
    at_sizes = with_relations(sizes, relations)
    named = {k: v for k, v in at_sizes.items() if k not in relations}
    return relations_needed(by_names(text, named), unknown)


def _summands(a: str, b: str, unknown: Collection[str]) -> dict[str, str]:
    """A sum of unknowns against a sum of as many named sizes (a critic's
    `Linear(obs_dim + action_dim)` over `(o + a,)`), term by term: each
    unknown the named size its name begins like (`obs_dim`: `o`), else in
    the order written. Empty otherwise."""
    for mine, named in (
        (a.split(" + "), b.split(" + ")),
        (b.split(" + "), a.split(" + ")),
    ):
        plain = all(DIM_NAME.fullmatch(t) for t in named)
        if len(mine) < 2 or len(mine) != len(named) or not plain:
            continue
        if all(t in unknown for t in mine) and not set(named) & set(unknown):
            alike = _alike(mine, named)
            whole = sorted(alike) == sorted(mine) and len(set(alike.values())) == len(
                mine
            )
            return alike if whole else dict(zip(mine, named))
    return {}


def _alike(sizes: Sequence[str], named: Sequence[str]) -> dict[str, str]:
    """Each of `sizes` that begins like exactly one of the `named` sizes
    (`obs_dim`: `o`, `height`: `h`), as an author names a constructor's size
    after the dimension it builds the model to fit."""
    alike = {}
    for size in sizes:
        like = [n for n in named if n[0] == size[0]]
        if len(like) == 1:
            alike[size] = like[0]
    return alike


#: A `ValidationError`'s `expected Float[Array, 'b n'] ..., got float32[b,m]`.
_EXPECTED_GOT = re.compile(
    r"expected \w+\[[\w.]+, '([^']*)'\][^\n]*?, got \w+\[([^\]]*)\]"
)


#: A `ValidationError`'s binding: `with d=d__1 bound by layers[0].weight`.
_BOUND = re.compile(r"with (\w+)=(\w+) bound by")


def _annotation_against_shape(text: str) -> list[tuple[str, str]]:
    """The dimensions a `ValidationError` says differ: each of the
    annotation's plain dimensions (a name, a number) against the value's,
    and a name against the size another leaf bound it to (a sequence's one
    item built with names of its own, `d__1`, which at run time binds the
    call's `d`: it holds one instance)."""
    pairs = [
        (name, bound) for name, bound in _BOUND.findall(text) if SCOPED.fullmatch(bound)
    ]
    for written, shape in _EXPECTED_GOT.findall(text):
        tokens, sizes = written.split(), [d.strip() for d in shape.split(",")]
        if len(tokens) != len(sizes) or any(
            not t.isidentifier() and not t.isdigit() for t in tokens
        ):
            continue
        pairs += [(t, s) for t, s in zip(tokens, sizes) if t != s]
    return pairs


def with_relations(sizes: dict[str, Any], relations: dict[str, str]) -> dict[str, Any]:
    """`sizes` with each name a relation holds at the size it says, those
    whose other side cannot be read left. Relations hold together: one
    whose other side a later one sets (`d of ema == d of params`, then `d of
    params == l`) takes that side's size too, each pass one link further."""
    sizes = dict(sizes)
    for _ in relations:  # a link further each pass, until none changes
        before = {name: str(sizes.get(name)) for name in relations}
        for name, other in relations.items():
            scope = {**_OPERATIONS, **sizes}
            try:
                sizes[name] = eval(other, {"__builtins__": {}}, scope)
            except Exception:
                continue
        if all(str(sizes.get(name)) == was for name, was in before.items()):
            break
    return sizes


def relations_text(relations: dict[str, str], scopes: InstanceScopes) -> str:
    """The note for the relations a check took of sizes no annotation names."""
    shown = ", ".join(
        scopes.readable(f"{name} == {other}")
        for i, (name, other) in enumerate(relations.items())
        if (other, name) not in list(relations.items())[:i]  # said once
    )
    return (
        "sizes no annotation of the function names (a constructor's, or those "
        "each instance of a class the call holds several times binds for "
        f"itself) were taken as the code needs them: {shown}"
    )


#: At most this many relations of sizes no annotation names per function.
MAX_RELATIONS = 32


def solved(
    trace: Callable[[], Any],
    failure: Callable[[Any], str | None],
    needed: Callable[[str], dict[str, str]],
    relations: dict[str, str],
    unusable: dict[str, str] | None = None,
) -> Any:
    """`trace()`, and while what it found is a failure (`failure` gives its
    text, None when it is none) that shows what the code needs of sizes no
    annotation names (`needed`), those relations taken into `relations` and
    `trace()` again: unknown sizes are solved, never guessed.

    It always ends: a failure that asks only for relations already taken
    (one whose size the checker cannot evaluate, `in__1 == min(d, 3)`) ends
    the solving, those relations put in `unusable` for the note that says
    the check stopped there; so does a failure past `MAX_RELATIONS`, and one
    that asks again for relations taken before (two that undo each other,
    `kv_dim == d_q` then `kv_dim == d_kv`)."""
    found = trace()
    seen = {frozenset(relations.items())}
    while (text := failure(found)) is not None:
        new = needed(text)
        fresh = {
            name: size for name, size in new.items() if relations.get(name) != size
        }
        if not fresh:
            if unusable is not None:
                unusable.update(new)
            break
        after = frozenset({**relations, **fresh}.items())
        if len(relations) > MAX_RELATIONS or after in seen:
            break  # relations that undo each other: the failure stands
        seen.add(after)
        relations.update(fresh)
        found = trace()
    return found


#: JAX's words for a size too large for the axis it is taken from (`top_k`'s
#: `k`, a slice, a cache's update): an ordering the code needs, never a size
#: an unknown must equal.
ORDERING = re.compile(r"must be (?:no larger than|smaller than|less than or equal to)")

#: At most this many assignments of unknown sizes are tried by `matched`.
MAX_MATCHES = 48


def _assignments(free: Sequence[str], named: Sequence[str]) -> Iterator[dict[str, str]]:
    """Each of the `free` sizes equal to one of the `named` ones: first those
    named like one (`height`: `h`, `width`: `w`, together, as an author
    builds a model to fit its input), then fewest first (one size, then
    two, ...)."""
    if len(alike := _alike(free, named)) > 1:
        yield alike
    for k in range(1, len(free) + 1):
        for chosen in itertools.combinations(free, k):
            for names in itertools.product(named, repeat=k):
                yield dict(zip(chosen, names))


def matched(
    trace: Callable[[], Any],
    failure: Callable[[Any], str | None],
    unknown: Collection[str],
    named: Sequence[str],
    relations: dict[str, str],
    most: int = MAX_MATCHES,
    guessed: set[str] | None = None,
) -> tuple[Any] | None:
    """Where a failure shows no relation the checker can read (a size JAX
    wrote at concrete witnesses, `(20,)` against `(10,)`, or one made of
    several unknowns, `edge_dim + 2*node_dim`): the unknown sizes set equal
    to sizes the annotations name, fewest first, until `trace()` finds no
    failure. One assignment that makes the function pass makes it pass
    (DESIGN, "an error is certain"); it stays in `relations`, for the note,
    and its names go in `guessed`, with those solved under it: one
    assignment of several that pass, not one the code needs. Returns
    `(what the passing trace found,)`, or None when none of the first
    `most` does: the failure stands."""
    free = [u for u in sorted(unknown) if u not in relations]
    for assignment in itertools.islice(_assignments(free, named), most):
        before = dict(relations)
        relations.update(assignment)
        found = trace()
        if failure(found) is None:
            if guessed is not None:  # with the sizes solved under it
                guessed.update(name for name in relations if name not in before)
            return (found,)
        relations.clear()
        relations.update(before)
    return None


def solved_or_matched(
    trace: Callable[[], Any],
    failure: Callable[[Any], str | None],
    needed: Callable[[str], dict[str, str]],
    taken: tuple[dict[str, str], dict[str, str], set[str]],
    sizes: tuple[Collection[str], Sequence[str]],
    most: int = MAX_MATCHES,
) -> Any:
    """`solved`, and where a failure stays that shows no relation the checker
    can read, `matched` (its first `most` tries): `taken` is `(relations,
    unusable, guessed)`, `sizes` the unknown sizes and those the annotations
    name. A failure against the return annotation is never matched, nor
    one JAX says is an ordering (`ORDERING`)."""
    relations, unusable, guessed = taken
    found = solved(trace, failure, needed, relations, unusable)
    text = failure(found)
    if text is None or unusable or "the return value" in text or ORDERING.search(text):
        # Against the return annotation, a constructor's size is the
        # function's contract broken: an error, never a size to take. An
        # ordering is no equality: the witnesses find the side that runs.
        return found
    # An assignment tried that fails asks again for what it set: no size
    # the checker cannot evaluate, so none is said to be (a scratch dict).
    again = lambda: solved(trace, failure, needed, relations, {})  # noqa: E731
    searched = matched(again, failure, *sizes, relations, most, guessed)
    return found if searched is None else searched[0]
