"""`_runtime/checking/dims.py`: which dimensions an annotation binds, and whom to
blame when the leaves of one call disagree on a dimension."""

from __future__ import annotations

from jaxtyping import Array, Float

from treespec._runtime.checking.dims import Binding, blame, bound_dims


def test_a_variadic_name_binds_only_the_leading_dimensions() -> None:
    # `*b c` over (2, 3, 4): *b is (2, 3), c the last one alone.
    assert bound_dims(Float[Array, "*b c"], (2, 3, 4)) == [("b", (2, 3)), ("c", 4)]
    assert bound_dims(Float[Array, "n *b"], (5, 2, 3)) == [("n", 5), ("b", (2, 3))]


def test_a_tie_between_two_later_groups_blames_those_outside_the_first() -> None:
    # n=3 from the first binder alone, then two groups of two: no group is
    # the largest, so the first binder's size is the one to match.
    first = Binding("a", [("n", 3)])
    later = [Binding(p, [("n", 4 if p in "bc" else 5)]) for p in "bcde"]
    blamed, involved = blame([first, *later])
    assert set(blamed) == {"b", "c", "d", "e"}
    assert blamed["b"].expected == "n=3 bound by a"
    assert involved == {"a", "b", "c", "d", "e"}


def test_the_largest_group_wins_over_the_first_binder() -> None:
    blamed, _ = blame([Binding(p, [("n", 3 if p == "a" else 4)]) for p in "abc"])
    assert set(blamed) == {"a"}
    assert blamed["a"].expected == "n=4 bound by b, c"


def test_an_arguments_size_wins_over_a_majority_in_the_return_value() -> None:
    # The argument (checked before, `fixed`) is never blamed: the return
    # value's leaves must match it, however many agree with each other.
    argument = Binding("x", [("n", 3)], fixed=True)
    returned = [Binding(f"return[{i}]", [("n", 4)]) for i in range(3)]
    blamed, _ = blame([argument, *returned])
    assert set(blamed) == {"return[0]", "return[1]", "return[2]"}
    assert blamed["return[0]"].expected == "n=3 bound by x"
