"""Ahead of time: `trace`, `lower`, `compile`, `eval_shape`, and `jax.export`.

A call's stages are those of a `jax.jit` of one *staged* function: it takes
the user's arguments with `None` at every static leaf (the dynamic half that
`treespec.partition` gives), and holds the static leaves as constants. An
argument whose every leaf is static is one of its `static_argnums` (or
`static_argnames`): it is not in the program's signature, as with `jax.jit`. So
JAX's own objects (`jax.stages.Traced`, `Lowered`, `Compiled`, and the
`Exported` of `jax.export.export(f)`, which asks `f.trace`) speak in the
user's arguments: their `in_tree` is the arguments' structure, never the
internal split (`dynamic[0]`). The staged function inlines the trace of the
call's own `jax.jit` (its route and key), so a stage and a call find one
trace in JAX's cache, as `jax.jit`'s do: the function runs once; validation,
the multi-process check and the trace count are the call's.

`Lowered` and `Compiled` wrap JAX's: a `Compiled` is called like the function
(static leaves included, and checked against what it was compiled for, by
key path), and both give `out_info` with non-array outputs as their values.
Any other name is JAX's own, forwarded where the installed JAX has it.

Non-array outputs are constants of the trace: the program returns the arrays,
with `None` in their places (so an `Exported` needs no treespec to be called),
and `Lowered`/`Compiled`/`eval_shape` put the values back.

Donation: JAX donates whole arguments, so a staged program donates an
argument whose traced leaves are all `Donate`, and refuses one with donated
and kept traced leaves (a call donates leaf by leaf). An `Exported` keeps no
donation: donate where it is called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Self

import jax

from .._model.errors import AT_THE_CALL, SpecError, ValidationError
from .._runtime.calling.routes import Key, key_split, key_static
from .._runtime.partition import combine
from .._runtime.planning.graph import Updated, settle
from .._runtime.planning.plan import Kind, Split
from .mismatches import mismatches
from .outputs import WithStatic, join_output, split_output

if TYPE_CHECKING:
    from .._runtime.calling.splitter import Splitter

__all__ = ["Compiled", "Lowered", "Stage", "StagedCall", "staged_jit"]


class StagedCall:
    """One call as its stages see it: the bound arguments, the key and dynamic
    leaves of the split (every leaf flattened, so each has a key path), and
    the dynamic halves of the arguments (`None` at static leaves)."""

    def __init__(self, splitter: Splitter, args: Any, kwargs: Any) -> None:
        self.splitter = splitter
        self.spec = splitter.spec
        self.bound = splitter.bind(tuple(args), dict(kwargs))
        self.key: Key
        self.key, dynamic = splitter.general.split(*self.bound)
        self.dynamic = tuple(dynamic)
        #: The key's split, kept: the key refers to it weakly.
        self.split = split = key_split(self.key)
        leaves = split.merge(key_static(self.key), self.dynamic)
        halves = [
            None if kind is Kind.STATIC else leaf
            for kind, leaf in zip(split.kinds, leaves)
        ]
        self.args: tuple[Any, ...]
        self.kwargs: dict[str, Any]
        args_half, kwargs_half = jax.tree_util.tree_unflatten(
            split.plan.treedef, halves
        )
        self.args, self.kwargs = tuple(args_half), dict(kwargs_half)
        #: The arguments whose every leaf is static: not in the program's
        #: signature (as `jax.jit`'s `static_argnums`/`static_argnames`).
        self.static_argnums, self.static_argnames = _wholly_static(self, split)
        # JAX hashes its static arguments: None stands for each (the values
        # are constants of the trace already).
        self.args = tuple(
            None if i in self.static_argnums else a for i, a in enumerate(self.args)
        )
        for name in self.static_argnames:
            self.kwargs[name] = None
        #: The non-array outputs, set when the staged function is traced (the
        #: program returns `None` in their places).
        self.static_output: Any = None
        #: Set when the function changed NNX objects of the call: which of its
        #: `Variable`s (the program returns `(result, their new values)`),
        #: and whether the result holds the arguments' nodes.
        self.updates: tuple[tuple[int, ...], bool] | None = None

    def output(self, out: Any) -> Any:
        """The output of the staged program (or its `out_info`) with the
        non-array outputs put back: the result, as `graph.Updated` when
        the function changed NNX objects of the call."""
        if self.static_output is not None:
            out = combine(out, self.static_output)
        if self.updates is None:
            return out
        result, values = out
        return Updated(result, self.updates[0], values, self.updates[1])

    def result(self, out: Any, *, write: bool = False, bound: Any = None) -> Any:
        """The function's result from `output`'s: with `write`, the changes
        to the call's NNX objects written into the caller's, those of
        `bound` (a `Compiled`'s call) or this call's; else left out
        (`out_info`, `eval_shape`)."""
        out = self.output(out)
        if type(out) is not Updated:
            return out
        split = self.split
        root = split.plan.route.root_of(*(bound or self.bound))
        return settle(out, split.plan.graph, root, write=write)

    def program_arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments the program takes: the dynamic halves, without the
        wholly static arguments."""
        args = tuple(a for i, a in enumerate(self.args) if i not in self.static_argnums)
        names = self.static_argnames
        return args, {k: v for k, v in self.kwargs.items() if k not in names}

    def arguments(self) -> list[tuple[str, Any, Any]]:
        """`(name, full value, dynamic half)` of each argument, in call order."""
        names = [p.name for p in self.spec.positional]
        out = []
        for i, (value, half) in enumerate(zip(self.bound[0], self.args)):
            out.append((names[i] if i < len(names) else f"args[{i}]", value, half))
        for name in sorted(self.bound[1]):
            out.append((name, self.bound[1][name], self.kwargs[name]))
        return out


def _wholly_static(
    call: StagedCall, split: Split
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The positional indices and keyword names of the arguments with at
    least one leaf, all of them static."""
    argnums: list[int] = []
    argnames: list[str] = []
    kinds = split.kinds
    start = 0
    for index, (name, value, _) in enumerate(call.arguments()):
        n = len(jax.tree_util.tree_leaves(value))
        if n and all(k is Kind.STATIC for k in kinds[start : start + n]):
            if index < len(call.args):
                argnums.append(index)
            else:
                argnames.append(name)
        start += n
    return tuple(argnums), tuple(argnames)


def _donated(call: StagedCall) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The arguments a staged program donates: those whose traced leaves are
    all `Donate` (JAX donates whole arguments)."""
    split = call.split
    infos, kinds = split.plan.infos, split.kinds
    argnums: list[int] = []
    argnames: list[str] = []
    start = 0
    for index, (name, value, _) in enumerate(call.arguments()):
        n = len(jax.tree_util.tree_leaves(value))
        traced = [i for i in range(start, start + n) if kinds[i] is not Kind.STATIC]
        donated = [i for i in traced if kinds[i] is Kind.DONATE]
        start += n
        if not donated:
            continue
        if len(donated) != len(traced):
            kept = [infos[i].path for i in traced if kinds[i] is not Kind.DONATE]
            raise SpecError(
                f"argument {name} has donated and kept traced leaves (donated: "
                f"{', '.join(infos[i].path for i in donated)}; kept: "
                f"{', '.join(kept)}), and an ahead-of-time program donates whole "
                "arguments only, as jax.jit's donate_argnums does. Mark every "
                f"traced leaf of {name} Donate[...], or none, to trace, lower or "
                "export it; a call of the function donates leaf by leaf."
            )
        if index < len(call.args):
            argnums.append(index)
        else:
            argnames.append(name)
    return tuple(argnums), tuple(argnames)


def _in_shardings(call: StagedCall) -> tuple[Any, ...] | None:
    """`in_shardings` of the staged program: the entries of the dynamic
    leaves, shaped like the positional arguments."""
    split = call.split
    entries = split.plan.route.in_shardings(split)
    if entries is None:
        return None
    given = iter(entries)
    per_leaf = [None if k is Kind.STATIC else next(given) for k in split.kinds]
    args, kwargs = jax.tree_util.tree_unflatten(split.plan.treedef, per_leaf)
    if any(v is not None for v in jax.tree_util.tree_leaves(kwargs)):
        raise SpecError(
            "in_shardings for a keyword-only argument: an ahead-of-time program "
            "places positional arguments only (as jax.jit's in_shardings)."
        )
    # As jax.jit's: one entry per positional argument that is not static.
    return tuple(a for i, a in enumerate(args) if i not in call.static_argnums)


def staged_jit(
    call: StagedCall, run: Callable[..., Any], options: Mapping[str, Any]
) -> Any:
    """The `jax.jit` whose stages are those of `call` (see the module
    docstring); `run(args, kwargs)` inlines the call's own program."""
    key, split = call.key, call.split
    static = key_static(key)
    treedef = split.plan.treedef

    def staged(*args: Any, **kwargs: Any) -> Any:
        dynamic = jax.tree_util.tree_leaves((args, kwargs))
        full = jax.tree_util.tree_unflatten(treedef, split.merge(static, dynamic))
        out = run(*full)
        if type(out) is Updated:  # NNX objects changed: their new values too
            call.updates = (out.indices, out.nodes)
            out = split_output((join_output(out.result), join_output(out.values)))
        if type(out) is WithStatic:  # the program returns the arrays only
            call.static_output = out.static
            return out.dynamic
        return out

    spec = call.spec
    staged.__name__ = spec.name.rpartition(".")[2]
    staged.__qualname__ = spec.name
    signature = call.splitter.binder.signature
    if signature is not None:  # JAX names the program's arguments by it
        staged.__signature__ = signature  # type: ignore[attr-defined]
    options = dict(options)
    argnums, argnames = _donated(call)
    shardings = _in_shardings(call)
    if shardings is not None:
        options["in_shardings"] = shardings
    return jax.jit(
        staged,
        static_argnums=call.static_argnums,
        static_argnames=call.static_argnames,
        donate_argnums=argnums,
        donate_argnames=argnames,
        **options,
    )


class Stage:
    """What `Lowered` and `Compiled` share: JAX's own object of that stage,
    the call it was made for, and the arguments bound first (a method's
    instance). Names JAX's object has are its own, forwarded."""

    def __init__(self, jax_stage: Any, call: StagedCall, first: tuple[Any, ...] = ()):
        self._jax = jax_stage
        self._call = call
        self._first = first

    def as_text(self, *args: Any, **kwargs: Any) -> str:
        """The module as text (StableHLO when lowered)."""
        return str(self._jax.as_text(*args, **kwargs))

    @property
    def in_tree(self) -> Any:
        """The structure of the program's arguments: yours with `None` at
        static leaves, without those whose every leaf is static."""
        return self._jax.in_tree

    @property
    def out_info(self) -> Any:
        """The output: `jax.ShapeDtypeStruct` for arrays, the values of the rest."""
        return self._call.result(self._jax.out_info)

    def __getattr__(self, name: str) -> Any:
        if name in ("_jax", "_call", "_first"):  # not set yet (a copy, a pickle)
            raise AttributeError(name)
        return getattr(self._jax, name)

    def __copy__(self) -> Self:
        return type(self)(self._jax, self._call, self._first)

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        # JAX's program cannot be copied (its deepcopy refuses): shared, as a
        # deep copy shares a function.
        return self.__copy__()


class Lowered(Stage):
    """What [`Jitted.lower`][treespec.Jitted.lower] gives: JAX's `Lowered`,
    compiled into a [`Compiled`][treespec._transforms.stages.Compiled] that is
    called like the function.

    Names JAX's `Lowered` has (`as_text`, `compiler_ir`, `cost_analysis`,
    `in_tree`, `args_info`, ...) are its own; `out_info` holds non-array
    outputs as their values. See [Ahead of time and export](aot.md).

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec
        from treespec import Static

        @treespec.jit
        def f(x, n: Static[int]):
            return x * n, "done"

        lowered = f.lower(jnp.ones(2), 3)
        assert lowered.out_info[1] == "done"
        assert "stablehlo" in lowered.as_text()
        ```
    """

    def bound(self, *first: Any) -> Lowered:
        """This lowering, whose `Compiled` takes the arguments after `first`
        (a method's instance: `model.apply.lower(x)` gives this)."""
        return Lowered(self._jax, self._call, first)

    def compile(self, *args: Any, **kwargs: Any) -> Compiled:
        """Compile; the result is called with the same arguments as the function.

        Arguments are those of `jax.stages.Lowered.compile`
        (`compiler_options=...`), passed on as they are.
        """
        compiled = self._jax.compile(*args, **kwargs)
        return Compiled(compiled, self._call, self._first)


class Compiled(Stage):
    """An executable for one tree structure and one set of static values,
    called like the function.

    A call it was not compiled for is a
    [`ValidationError`][treespec.ValidationError] naming each leaf that
    differs. Names JAX's `Compiled` has (`as_text`, `cost_analysis`,
    `memory_analysis`, `input_shardings`, `output_shardings`, ...) are its own.

    !!! example

        ```python
        import jax.numpy as jnp
        import treespec
        from treespec import Static

        @treespec.jit
        def f(x, n: Static[int]):
            return x * n

        compiled = f.lower(jnp.ones(2), 3).compile()
        print(compiled(jnp.zeros(2), 3))
        try:
            compiled(jnp.ones(2), 4)
        except treespec.ValidationError as e:
            print(e)
        ```
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the executable with the function's arguments, static leaves
        included; they must be those it was compiled for."""
        with AT_THE_CALL:
            call = StagedCall(self._call.splitter, (*self._first, *args), kwargs)
        issues = mismatches(self._call, call)
        if issues:
            raise ValidationError(issues, f"{call.spec.name} (compiled)")
        args, kwargs = call.program_arguments()
        out = self._jax(*args, **kwargs)
        return self._call.result(out, write=True, bound=call.bound)
