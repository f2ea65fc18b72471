"""Spec tools: `spec_of`, `flag_tree`, `explain`."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import jax

from .._model.errors import SpecError, ValidationError
from .._model.rules import uncovered_fix
from .._model.spec import POSITIONAL_KINDS, AnyNode, Spec
from .checking.call_checks import plan_issues
from .planning.build import build_plan, check_default
from .planning.plan import Kind, LeafInfo, Plan
from .planning.resolve import walk_value
from .reading.derive import derive_spec
from .reading.flags import FlagEntry, Flags, normalize_flags
from .reading.hints import parse_annotation
from .reading.typing_forms import Context

__all__ = [
    "caller_namespace",
    "explain",
    "flag_tree",
    "in_class_body",
    "method_spec",
    "spec_for",
    "spec_of",
]

_specs: weakref.WeakKeyDictionary[Any, Spec] = weakref.WeakKeyDictionary()
_specs_lock = threading.Lock()


def caller_namespace(depth: int) -> dict[str, Any]:
    """The local names of the frame `depth` levels above the caller.

    Annotations may name classes defined in the function that applies the
    decorator (those live only in that frame's locals), or in code run by
    `exec` (whose globals are not a module's).
    """
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return {}
    local = frame.f_locals
    if local is frame.f_globals:
        return dict(frame.f_globals)
    namespace = {**frame.f_globals, **local}
    if sys.version_info < (3, 13) and frame.f_code.co_flags & inspect.CO_OPTIMIZED:
        # A function's frame, before Python 3.13: reading `f_locals` left a
        # snapshot of its variables on the frame, which would keep what the
        # function deletes or rebinds later (an instance whose method was
        # jitted) alive until it returns; `jax.jit` keeps nothing of the
        # caller's. Python refreshes the snapshot whenever it reads it again
        # (a debugger's trace function does so on each event).
        local.clear()
    return namespace


def in_class_body(namespace: Mapping[str, Any]) -> bool:
    """Whether `namespace` (from `caller_namespace`) is that of a class body."""
    return "__qualname__" in namespace and "__module__" in namespace


def _bound_transform(fun: Any) -> Any:
    """The transform a bound method is of (`m.f`, `f` a treespec transform), or
    None. A method object hands on the transform's attributes, its spec (which
    has `self`) included."""
    func = getattr(fun, "__func__", None)
    if getattr(fun, "__self__", None) is None or func is None:
        return None
    return func if isinstance(getattr(func, "__treespec_spec__", None), Spec) else None


def method_spec(spec: Spec, owner: type) -> Spec:
    """The spec of a method of `owner`, its unannotated `self` read as an
    instance of `owner` (see `Transformed.__set_name__`)."""
    if not spec.params or not isinstance(spec.params[0].node, AnyNode):
        return spec
    first = spec.params[0]
    if first.node.text or first.kind not in POSITIONAL_KINDS:
        return spec
    module = sys.modules.get(owner.__module__)
    ctx = Context(dict(vars(module)) if module else {}, {})
    node = parse_annotation(owner, ctx, f"parameter {first.name!r} of {spec.name}")
    params = (dataclasses.replace(first, node=node), *spec.params[1:])
    return dataclasses.replace(spec, params=params)


def spec_for(fun: Any, localns: Mapping[str, Any]) -> Spec:
    transform = _bound_transform(fun)
    if transform is not None:  # called without `self`: its spec has none
        of_function: Spec = transform.__treespec_spec__
        return dataclasses.replace(of_function, params=of_function.params[1:])
    own = getattr(fun, "__treespec_spec__", None)
    if isinstance(own, Spec):
        return own
    try:
        cached = _specs.get(fun)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    spec = derive_spec(fun, localns)
    with _specs_lock, contextlib.suppress(TypeError):
        _specs[fun] = spec
    return spec


def spec_of(fun: Callable[..., Any]) -> Spec:
    """The [`Spec`][treespec.Spec] derived from `fun`'s annotations.

    Derived once per function and cached; a treespec transform returns the spec
    it was built with.

    **Arguments:**

    - `fun`: a function (or method, `functools.partial`, treespec transform).

    **Returns:**

    An immutable, hashable [`Spec`][treespec.Spec]; `repr(spec)` reads like the
    signature and `spec.tree()` shows every annotation as an indented tree.

    **Raises:**

    [`SpecError`][treespec.SpecError] for a bad annotation: a union whose members
    disagree on markers, a marker directly inside another, an unresolvable
    forward reference.

    !!! example

        ```python
        import treespec
        from treespec import Static

        def f(n: Static[int], x: float) -> float:
            return n * x

        print(treespec.spec_of(f))  # Spec(f(n: Static[int], x: float) -> float)
        ```
    """
    return spec_for(fun, caller_namespace(1))


def _is_function(obj: Any) -> bool:
    return (
        inspect.isfunction(obj)
        or inspect.ismethod(obj)
        or hasattr(obj, "__treespec_spec__")
        or (hasattr(obj, "func") and callable(obj))
    )


def _flag_value(info: LeafInfo, leaf: Any) -> bool:
    return info.resolve(leaf) is Kind.STATIC


def flag_tree(
    value: Any,
    annotation_or_fun: Any = None,
    *,
    flags: FlagEntry = None,
    default: str = "infer",
) -> Any:
    """The boolean tree (`True` = static) that treespec resolves for `value`.

    **Arguments:**

    - `value`: a concrete pytree. When `annotation_or_fun` is a function,
      `value` is the tuple of its positional arguments.
    - `annotation_or_fun`: an annotation (`Config`, `dict[str, Static[int]]`) or
      a function whose parameter annotations apply; `None` for none.
    - `flags`: explicit flags (a prefix tree of `True`/`False`/`None`/callables),
      which win over markers, as `static_flags` does.
    - `default`: the policy for leaves that no marker or flag covers.

    **Returns:**

    A tree shaped like `value` with a `bool` at every leaf; for a function, a
    tuple with one such tree per argument: exactly the `static_flags` form.

    !!! example

        ```python
        from typing import TypedDict
        import jax.numpy as jnp
        import treespec
        from treespec import Static

        class Config(TypedDict):
            n: Static[int]
            w: jnp.ndarray

        flags = treespec.flag_tree({"n": 3, "w": jnp.ones(2)}, Config)
        assert flags == {"n": True, "w": False}
        ```
    """
    check_default(default)
    localns = caller_namespace(1)
    leaves, treedef = jax.tree_util.tree_flatten(value)
    if annotation_or_fun is not None and _is_function(annotation_or_fun):
        spec = spec_for(annotation_or_fun, localns)
        if not isinstance(value, (tuple, list)):
            raise SpecError(
                "flag_tree(value, fun) takes the tuple of fun's positional arguments "
                f"as value; got {type(value).__name__}."
            )
        norm = normalize_flags(flags, spec) if flags is not None else Flags()
        args = tuple(value)
        plan, _ = build_plan(spec, norm, default, args, {}, None, check=False)
        arg_leaves = jax.tree_util.tree_leaves((args, {}))
        bools = [_flag_value(i, leaf) for i, leaf in zip(plan.infos, arg_leaves)]
        both = jax.tree_util.tree_unflatten(
            jax.tree_util.tree_structure((args, {})), bools
        )
        return tuple(both[0])
    if annotation_or_fun is None:
        from .._model.spec import AnyNode

        node: Any = AnyNode()
    else:
        node = parse_annotation(annotation_or_fun, Context({}, localns), "flag_tree")
    infos, _, uncovered = walk_value(
        value, node, flags=flags, default=default, check=False
    )
    if uncovered:
        raise SpecError(
            f"default='error' and nothing covers {', '.join(uncovered)}. "
            f"{uncovered_fix()}"
        )
    bools = [_flag_value(i, leaf) for i, leaf in zip(infos, leaves)]
    return jax.tree_util.tree_unflatten(treedef, bools)


def format_plan(plan: Plan, leaves: list[Any]) -> str:
    """One line per leaf: path, kind, what the leaf is, where the kind came from;
    then the fields that classes keep in their tree structure (annotated
    fields, and NNX's plain attributes)."""
    from .._model.errors import describe_value

    rows = []
    for info, leaf in zip(plan.infos, leaves):
        kind = info.resolve(leaf)
        source = info.source
        if info.kind is None:
            if info.source.startswith("default"):
                source += (
                    " (an array)" if kind is not Kind.STATIC else " (not an array)"
                )
            else:
                source += f" -> {kind is Kind.STATIC}"
        rows.append((info.path, kind.value, describe_value(leaf), source))
    for held in plan.held:  # in the cache key: an NNX plain attribute too
        source = f"{held.switch} (in the tree structure)"
        if not held.annotated:  # only NNX holds unannotated attributes
            source = "a plain attribute, which NNX holds static (in the tree structure)"
        rows.append((held.path, Kind.STATIC.value, describe_value(held.value), source))
    if not rows:
        return "(no leaves)"
    widths = [max(len(r[c]) for r in rows) for c in range(3)]
    return "\n".join(
        f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  <- {r[3]}"
        for r in rows
    )


def explain(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Print how treespec resolves `fun`'s arguments.

    **Arguments:**

    - `fun`: a function or a treespec transform (its `static_flags` and
      `default` are used).
    - `*args`, `**kwargs`: optional. Without them, the spec is printed as an
      indented tree of annotations; with them, one line per leaf of that call:
      key path, `static`/`dynamic`/`donate`, the value, and where the kind came
      from (a flag, a marker on which annotation, or the default).

    **Returns:**

    Nothing; the text goes to standard output.

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec
        from treespec import Static

        def f(n: Static[int], x):
            return n * x

        treespec.explain(f)
        treespec.explain(f, 3, jnp.ones(2))
        ```
    """
    print(explain_text(fun, args, kwargs, caller_namespace(1)))


def explain_text(
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    localns: Mapping[str, Any],
) -> str:
    """What `explain` prints: the annotation tree, or one line per leaf of a call."""
    spec = spec_for(fun, localns)
    if not args and not kwargs:
        return spec.tree()
    flags = getattr(fun, "_flags", None)
    if not isinstance(flags, Flags):
        flags = Flags()
    default = getattr(fun, "_default", "infer")
    floats: object = getattr(fun, "_float_args", None)  # what grad differentiates
    if isinstance(floats, frozenset) and _bound_transform(fun) is not None:
        floats = frozenset(i - 1 for i in floats if i > 0)  # `self` is bound
    try:
        signature: inspect.Signature | None = inspect.signature(fun)
    except (TypeError, ValueError):
        signature = None
    plan, issues = build_plan(
        spec,
        flags,
        default,
        args,
        kwargs,
        None,
        signature=signature,
        float_args=floats if isinstance(floats, frozenset) else frozenset(),
    )
    issues = plan_issues(spec, flags, plan, args, kwargs, frozenset(), issues)
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    text = f"{spec.name}\n" + format_plan(plan, leaves)
    if issues:
        text += "\n" + str(ValidationError(issues, spec.name))
    return text
