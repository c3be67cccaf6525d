"""Integer boxes in n dimensions: ``Coordinate``, ``Roi``, daisy's block-ID function and
``read_block``, a padded read of a ROI from an array.

The semantics are daisy's: a ``Roi`` is the half-open box ``[offset, offset + shape)``, division
of coordinates rounds toward negative infinity (Python's ``//``), and a disjoint intersection is
a zero-shape ROI rather than an error. Everything here is plain Python integers, so nothing
overflows. The module imports only the standard library; ``read_block`` imports numpy when
it is called.
"""

from __future__ import annotations

import operator
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

__all__ = ["Coordinate", "Roi", "cantor_number", "read_block"]

CoordinateLike = Union["Coordinate", Sequence[int]]
Amount = Union["Coordinate", Sequence[int], int, None]


def _describe(value: Any) -> str:
    """A short quotation of a value for error messages."""
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return "%s (%s)" % (text, type(value).__name__)


def _as_int(value: Any, what: str, whole: Any) -> int:
    """``value`` as a Python int; TypeError naming ``what`` for floats, bools, strings, ..."""
    if isinstance(value, bool):
        raise TypeError(
            "%s must contain integers; got %s in %s. Write 0 or 1 instead of a bool."
            % (what, _describe(value), _describe(whole))
        )
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            "%s must contain integers; got %s in %s. Convert it first, e.g. with int(...)."
            % (what, _describe(value), _describe(whole))
        ) from None


def _int_tuple(values: Any, what: str) -> Tuple[int, ...]:
    """A tuple of ints from a Coordinate, a sequence of ints or an iterable of ints."""
    if type(values) is Coordinate:
        return values
    if isinstance(values, (str, bytes)):
        raise TypeError(
            "%s must be a sequence of integers; got %s. Write e.g. [0, 0, 0]."
            % (what, _describe(values))
        )
    try:
        items = tuple(values)
    except TypeError:
        raise TypeError(
            "%s must be a sequence of integers; got %s. Write e.g. [0, 0, 0]."
            % (what, _describe(values))
        ) from None
    return tuple(_as_int(v, what, values) for v in items)


class Coordinate(tuple):
    """An immutable point or extent: one integer per axis.

    ``Coordinate([1, 2, 3])`` and ``Coordinate(1, 2, 3)`` are the same value. Arithmetic is
    element-wise: ``+``, ``-`` and unary ``-`` take another Coordinate (or an int, applied to
    every axis); ``*`` and ``//`` take a Coordinate or an int. ``//`` rounds toward negative
    infinity, as daisy's block index does. Mixing dimensionalities raises ``ValueError``.
    """

    __slots__ = ()

    def __new__(cls, *values: Any) -> "Coordinate":
        if len(values) == 1 and not isinstance(values[0], (int, bool)) and hasattr(
            values[0], "__iter__"
        ):
            return tuple.__new__(cls, _int_tuple(values[0], "Coordinate"))
        return tuple.__new__(cls, _int_tuple(values, "Coordinate"))

    @classmethod
    def _trusted(cls, values: Iterable[int]) -> "Coordinate":
        """Build without validation, for values already known to be ints (hot paths)."""
        return tuple.__new__(cls, values)

    def __getnewargs__(self) -> Tuple[Tuple[int, ...]]:
        return (tuple(self),)

    @property
    def dims(self) -> int:
        """The number of axes."""
        return len(self)

    def to_list(self) -> List[int]:
        """The values as a list of ints."""
        return list(self)

    def _operand(self, other: Any, op: str) -> Optional[Tuple[int, ...]]:
        """``other`` as one int per axis, or None when it is no number or coordinate."""
        if isinstance(other, bool):
            return None
        if isinstance(other, int):
            return (other,) * len(self)
        if isinstance(other, (tuple, list)):
            values = _int_tuple(other, "the right operand of Coordinate %s" % op)
            if len(values) != len(self):
                raise ValueError(
                    "cannot compute %r %s %r: they have %d and %d dimensions. Use coordinates "
                    "with one value per axis of the same volume." % (self, op, other, len(self), len(values))
                )
            return values
        try:
            value = operator.index(other)
        except TypeError:
            return None
        return (value,) * len(self)

    def __add__(self, other: Any) -> "Coordinate":  # type: ignore[override]
        values = self._operand(other, "+")
        if values is None:
            return NotImplemented
        return Coordinate._trusted(a + b for a, b in zip(self, values))

    def __radd__(self, other: Any) -> "Coordinate":
        values = self._operand(other, "+")
        if values is None:
            return NotImplemented
        return Coordinate._trusted(b + a for a, b in zip(self, values))

    def __sub__(self, other: Any) -> "Coordinate":
        values = self._operand(other, "-")
        if values is None:
            return NotImplemented
        return Coordinate._trusted(a - b for a, b in zip(self, values))

    def __rsub__(self, other: Any) -> "Coordinate":
        values = self._operand(other, "-")
        if values is None:
            return NotImplemented
        return Coordinate._trusted(b - a for a, b in zip(self, values))

    def __mul__(self, other: Any) -> "Coordinate":  # type: ignore[override]
        values = self._operand(other, "*")
        if values is None:
            return NotImplemented
        return Coordinate._trusted(a * b for a, b in zip(self, values))

    def __rmul__(self, other: Any) -> "Coordinate":  # type: ignore[override]
        return self.__mul__(other)

    def __floordiv__(self, other: Any) -> "Coordinate":
        values = self._operand(other, "//")
        if values is None:
            return NotImplemented
        if 0 in values:
            raise ZeroDivisionError(
                "cannot compute %r // %r: a divisor is 0. Divide by extents of at least 1."
                % (self, other)
            )
        return Coordinate._trusted(a // b for a, b in zip(self, values))

    def __rfloordiv__(self, other: Any) -> "Coordinate":
        values = self._operand(other, "//")
        if values is None:
            return NotImplemented
        if 0 in self:
            raise ZeroDivisionError(
                "cannot compute %r // %r: a divisor is 0. Divide by extents of at least 1."
                % (other, self)
            )
        return Coordinate._trusted(b // a for a, b in zip(self, values))

    def __neg__(self) -> "Coordinate":
        return Coordinate._trusted(-a for a in self)

    def __pos__(self) -> "Coordinate":
        return self

    def __repr__(self) -> str:
        return "(" + ", ".join(str(v) for v in self) + ")"

    __str__ = __repr__


def _coordinate(value: Any, what: str) -> Coordinate:
    """``value`` as a Coordinate, with errors naming ``what``."""
    if type(value) is Coordinate:
        return value
    return Coordinate._trusted(_int_tuple(value, what))


def _amount(value: Amount, dims: int, what: str) -> Tuple[int, ...]:
    """A per-axis amount: None is 0 on every axis, an int is that on every axis."""
    if value is None:
        return (0,) * dims
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * dims
    values = _int_tuple(value, what)
    if len(values) != dims:
        raise ValueError(
            "%s must have %d values (one per axis); got %s." % (what, dims, _describe(value))
        )
    return values


class Roi:
    """A box of integer coordinates: ``Roi(offset, shape)`` is ``[offset, offset + shape)``.

    ``offset`` and ``shape`` are sequences of ints of the same length; a shape must not be
    negative (a zero extent is an empty ROI). ROIs are immutable and hashable, compare by
    offset and shape, and print as ``Roi((0, 0), (10, 10))``.
    """

    __slots__ = ("_offset", "_shape")

    def __init__(self, offset: CoordinateLike, shape: CoordinateLike) -> None:
        o = _coordinate(offset, "Roi offset")
        s = _coordinate(shape, "Roi shape")
        if len(o) != len(s):
            raise ValueError(
                "Roi offset %r and shape %r have %d and %d dimensions; give both one value per "
                "axis, e.g. Roi([0, 0], [10, 10])." % (o, s, len(o), len(s))
            )
        for extent in s:
            if extent < 0:
                raise ValueError(
                    "Roi shape %r has a negative extent; an extent is a size, 0 or more (to "
                    "start lower, change the offset)." % (s,)
                )
        self._offset = o
        self._shape = s

    @classmethod
    def _trusted(cls, offset: Iterable[int], shape: Iterable[int]) -> "Roi":
        """Build without validation, for ints known to be valid (hot paths)."""
        roi = object.__new__(cls)
        roi._offset = tuple.__new__(Coordinate, offset)
        roi._shape = tuple.__new__(Coordinate, shape)
        return roi

    @classmethod
    def _of(cls, offset: Coordinate, shape: Coordinate) -> "Roi":
        """A Roi holding two valid Coordinates as they are, with no copy and no check (the
        fastest way to build one: blockwise's Python worker makes every block's ROIs with it,
        sharing one shape Coordinate between blocks)."""
        roi = object.__new__(cls)
        roi._offset = offset
        roi._shape = shape
        return roi

    def __reduce__(self) -> Tuple[Any, Tuple[Tuple[int, ...], Tuple[int, ...]]]:
        return (Roi, (tuple(self._offset), tuple(self._shape)))

    @property
    def offset(self) -> Coordinate:
        """The first coordinate inside the box (same as ``begin``)."""
        return self._offset

    @property
    def begin(self) -> Coordinate:
        """The first coordinate inside the box."""
        return self._offset

    @property
    def shape(self) -> Coordinate:
        """The extent on every axis."""
        return self._shape

    @property
    def end(self) -> Coordinate:
        """The first coordinate past the box on every axis (exclusive)."""
        return Coordinate._trusted(o + s for o, s in zip(self._offset, self._shape))

    @property
    def dims(self) -> int:
        """The number of axes."""
        return len(self._offset)

    @property
    def size(self) -> int:
        """The number of points in the box (the product of the shape)."""
        n = 1
        for s in self._shape:
            n *= s
        return n

    def empty(self) -> bool:
        """Whether the box holds no point (some extent is 0)."""
        return 0 in self._shape

    def _same_dims(self, other: "Roi", method: str) -> None:
        if len(other._offset) != len(self._offset):
            raise ValueError(
                "%r.%s(%r): the ROIs have %d and %d dimensions; use ROIs of the same volume."
                % (self, method, other, len(self._offset), len(other._offset))
            )

    def contains(self, other: Union["Roi", CoordinateLike]) -> bool:
        """Whether ``other`` (a Roi, or a point as a Coordinate or sequence) lies inside.

        A point is inside when ``begin <= point < end`` on every axis (the end is exclusive).
        A ROI is inside when its begin and end both lie within ``[begin, end]``.
        """
        if isinstance(other, Roi):
            self._same_dims(other, "contains")
            return all(
                b <= ob and ob + os <= b + s
                for b, s, ob, os in zip(self._offset, self._shape, other._offset, other._shape)
            )
        if isinstance(other, (tuple, list)):
            point = _int_tuple(other, "the point given to Roi.contains")
            if len(point) != len(self._offset):
                raise ValueError(
                    "%r.contains(%r): the point has %d dimensions, the ROI %d; give one value "
                    "per axis." % (self, other, len(point), len(self._offset))
                )
            return all(b <= p < b + s for b, s, p in zip(self._offset, self._shape, point))
        raise TypeError(
            "Roi.contains expects a Roi or a Coordinate; got %s. Wrap a point as "
            "Coordinate([...])." % _describe(other)
        )

    def intersects(self, other: "Roi") -> bool:
        """Whether the two boxes share at least one point (empty ROIs intersect nothing)."""
        if not isinstance(other, Roi):
            raise TypeError("Roi.intersects expects a Roi; got %s." % _describe(other))
        self._same_dims(other, "intersects")
        return all(
            max(b, ob) < min(b + s, ob + os)
            for b, s, ob, os in zip(self._offset, self._shape, other._offset, other._shape)
        )

    def intersect(self, other: "Roi") -> "Roi":
        """The common part of two boxes.

        Disjoint boxes give an empty ROI (shape 0 on some axis) placed at the larger begin,
        as in daisy; test it with ``empty()``.
        """
        if not isinstance(other, Roi):
            raise TypeError("Roi.intersect expects a Roi; got %s." % _describe(other))
        self._same_dims(other, "intersect")
        begin = tuple(max(b, ob) for b, ob in zip(self._offset, other._offset))
        end = tuple(
            min(b + s, ob + os)
            for b, s, ob, os in zip(self._offset, self._shape, other._offset, other._shape)
        )
        return Roi._trusted(begin, (max(e - b, 0) for b, e in zip(begin, end)))

    def grow(self, amount_neg: Amount = None, amount_pos: Amount = None) -> "Roi":
        """Extend the box by ``amount_neg`` below its begin and ``amount_pos`` past its end.

        Each amount is a Coordinate, a sequence, an int (every axis) or None (0). Negative
        amounts shrink; shrinking below a zero extent raises ``ValueError``.
        """
        dims = len(self._offset)
        neg = _amount(amount_neg, dims, "Roi.grow amount_neg")
        pos = _amount(amount_pos, dims, "Roi.grow amount_pos")
        offset = tuple(o - n for o, n in zip(self._offset, neg))
        shape = tuple(s + n + p for s, n, p in zip(self._shape, neg, pos))
        if any(s < 0 for s in shape):
            raise ValueError(
                "%r.grow(%r, %r) would give the negative shape %r; shrink by at most the "
                "ROI's extent." % (self, amount_neg, amount_pos, Coordinate._trusted(shape))
            )
        return Roi._trusted(offset, shape)

    def shift(self, by: Amount) -> "Roi":
        """The same box moved by ``by`` (a Coordinate, a sequence or an int for every axis)."""
        delta = _amount(by, len(self._offset), "Roi.shift amount")
        return Roi._trusted((o + d for o, d in zip(self._offset, delta)), self._shape)

    translate = shift

    def __add__(self, by: Any) -> "Roi":
        """``roi + coordinate`` moves the box (as ``shift``)."""
        if isinstance(by, Roi):
            return NotImplemented
        return self.shift(by)

    def __sub__(self, by: Any) -> "Roi":
        """``roi - coordinate`` moves the box back (as ``shift`` by ``-by``)."""
        if isinstance(by, Roi):
            return NotImplemented
        delta = _amount(by, len(self._offset), "Roi subtraction amount")
        return Roi._trusted((o - d for o, d in zip(self._offset, delta)), self._shape)

    def to_slices(self, origin: Optional[CoordinateLike] = None) -> Tuple[slice, ...]:
        """Slices that index this box in an array whose first element is at ``origin``.

        ``origin`` defaults to all zeros. A box that begins before the origin raises
        ``ValueError``: numpy would read a negative start as counting from the array's end.
        """
        begin: Tuple[int, ...] = self._offset
        if origin is not None:
            o = _amount(origin, len(self._offset), "Roi.to_slices origin")
            begin = tuple(b - x for b, x in zip(begin, o))
        for axis, b in enumerate(begin):
            if b < 0:
                where = "" if origin is None else " relative to the origin %r" % (origin,)
                raise ValueError(
                    "%r.to_slices(): the ROI begins at %d on axis %d%s, before the array; "
                    "numpy would wrap a negative index around to the array's end. Intersect "
                    "the ROI with the array's ROI first (roi.intersect(array_roi)) or read it "
                    "padded with read_block(array, roi)." % (self, b, axis, where)
                )
        return tuple(slice(b, b + s) for b, s in zip(begin, self._shape))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Roi):
            return NotImplemented
        return self._offset == other._offset and self._shape == other._shape

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        if result is NotImplemented:
            return result
        return not result

    def __hash__(self) -> int:
        return hash((self._offset, self._shape))

    def __repr__(self) -> str:
        return "Roi(%r, %r)" % (self._offset, self._shape)

    __str__ = __repr__


def cantor_number(index: Iterable[int]) -> int:
    """daisy's block ID of a grid index: the generalised Cantor ("pyramid") number.

    ``cantor_number([x1, ..., xn]) = sum over k of C(x1 + ... + xk + k - 1, k)``, as
    ``funlib.math.cantor_number`` and daisy's ``block.rs`` define it (negative entries count
    as 0, as daisy clamps them). Exact for every size: Python integers never overflow.
    """
    result = 0
    total = 0
    for k, x in enumerate(index, 1):
        if x > 0:
            total += x
        if total == 0:
            continue
        v = 1
        for d in range(k):
            v = v * (total + d) // (d + 1)
        result += v
    return result



def read_block(array: Any, roi: Roi, fill: Any = 0, origin: Optional[CoordinateLike] = None) -> Any:
    """The ROI ``roi`` of ``array`` as a new numpy array of shape ``roi.shape``, padded.

    ``array`` is anything numpy-like with ``shape``, ``dtype`` and slicing (a numpy array, a
    ``np.memmap``, a Zarr or HDF5 array); its first element is at ``origin`` (default all
    zeros). The part of ``roi`` inside the array is copied; the rest (where a block's read ROI
    sticks out of the volume at its edge) is ``fill``. The result has the array's dtype and is
    always a copy, never a view of a memmap. When the array has more axes than the ROI, the
    leading ones (channels, say) are read whole: a ``(3, 40, 40)`` array and a 2-D ROI give
    ``(3,) + roi.shape``.
    """
    import numpy as np

    if not isinstance(roi, Roi):
        raise TypeError(
            "read_block expects a Roi as its roi; got %s. Pass block.read_roi, or build one "
            "with Roi(offset, shape)." % _describe(roi)
        )
    try:
        shape = tuple(int(n) for n in array.shape)
    except (AttributeError, TypeError):
        raise TypeError(
            "read_block expects a numpy-like array (with a shape); got %s." % _describe(array)
        ) from None
    dims = roi.dims
    if len(shape) < dims:
        raise ValueError(
            "read_block(array, %r): the array has %d axes %r, the ROI %d; give a ROI with one "
            "value per axis of the array." % (roi, len(shape), shape, dims)
        )
    lead = shape[: len(shape) - dims]
    start = _amount(origin, dims, "read_block origin")
    array_roi = Roi._trusted(start, shape[len(shape) - dims :])
    inside = roi.intersect(array_roi)
    whole = tuple(slice(None) for _ in lead)
    if inside == roi:
        return np.array(array[whole + roi.to_slices(origin=start)], copy=True)
    out = np.full(lead + tuple(roi.shape), fill, dtype=array.dtype)
    if not inside.empty():
        out[whole + inside.to_slices(origin=roi.offset)] = array[
            whole + inside.to_slices(origin=start)
        ]
    return out
