"""broadcast_shapes (ONNX/NumPy multidirectional broadcasting with dynamic dims) and shape_refines."""

from __future__ import annotations

import pytest
from niro.ir import broadcast_shapes
from niro.ir.shapes import format_shape, shape_refines


@pytest.mark.parametrize(
    ("lhs", "rhs", "expected"),
    [
        ((2, 3), (2, 3), (2, 3)),
        ((2, 3), (3,), (2, 3)),
        ((2, 1), (1, 3), (2, 3)),
        ((), (4, 5), (4, 5)),
        ((5, 1, 4), (3, 1), (5, 3, 4)),
        ((None, 4), (4,), (None, 4)),
        ((None,), (3,), (3,)),  # a dynamic dim against n > 1 must be n (or 1)
        ((3,), (None,), (3,)),
        ((None,), (1,), (None,)),  # against 1 it stays unknown
        ((None,), (None,), (None,)),
        ((None,), (0,), (0,)),
        ((1,), (0,), (0,)),
        (None, (2, 3), None),  # unknown rank on either side: unknown rank
        ((2, 3), None, None),
    ],
)
def test_broadcast(lhs, rhs, expected) -> None:
    assert broadcast_shapes(lhs, rhs) == expected


def test_mismatch_names_both_shapes_and_the_axis() -> None:
    with pytest.raises(
        ValueError,
        match=r"^shapes \(2, 3\) and \(4,\) do not broadcast: dim 3 vs 4 at axis 1 of the broadcast result$",
    ):
        broadcast_shapes((2, 3), (4,))
    with pytest.raises(ValueError, match=r"dim 2 vs 0 at axis 0"):
        broadcast_shapes((2,), (0,))


def test_format_shape() -> None:
    assert [format_shape(shape) for shape in (None, (), (3,), (None, 4))] == [
        "*",
        "()",
        "(3,)",
        "(?, 4)",
    ]


@pytest.mark.parametrize(
    ("declared", "inferred", "ok"),
    [
        ((2, 3), (2, 3), True),
        ((2, 3), (None, 3), True),  # a declaration may know more
        ((None, 3), (2, 3), False),  # never less
        ((2, 4), (2, 3), False),
        ((2, 3), None, True),
        (None, None, True),
        (None, (2, 3), False),
        ((2,), (2, 3), False),
    ],
)
def test_shape_refines(declared, inferred, ok) -> None:
    assert shape_refines(declared, inferred) is ok
