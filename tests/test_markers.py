from typing import Annotated, get_args, get_origin

import treespec
from treespec import Donate, Dynamic, Static
from treespec._model.markers import Marker, marker_of


def test_markers_are_annotated_aliases() -> None:
    for alias, marker in (
        (Static, Marker.STATIC),
        (Dynamic, Marker.DYNAMIC),
        (Donate, Marker.DONATE),
    ):
        hint = alias[int]
        assert get_origin(hint) is Annotated
        assert get_args(hint) == (int, marker)


def test_marker_is_recoverable_and_foreign_metadata_is_kept_apart() -> None:
    base, markers, foreign = marker_of(Annotated[Static[list[int]], "doc"])
    assert base == list[int]
    assert markers == (Marker.STATIC,)
    assert foreign == ("doc",)


def test_plain_annotations_have_no_marker() -> None:
    assert marker_of(int) == (int, (), ())


def test_public_names() -> None:
    for name in (
        "Static",
        "Dynamic",
        "Donate",
        "jit",
        "spec_of",
        "flag_tree",
        "partition",
        "combine",
        "explain",
        "dataclass",
        "SpecError",
        "ValidationError",
    ):
        assert hasattr(treespec, name), name
    assert issubclass(treespec.ValidationError, TypeError)
