"""Small value classes without the cost of making a dataclass at every import.

``@dataclass`` writes each generated method (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, a frozen
class's ``__setattr__`` and ``__delattr__``) as source text and compiles it with ``exec`` when the class is made,
at every import: ~3.8 M instructions (~1 ms) for a frozen class of four fields, 4.5 M for six, where a class
written out costs ~0.07 M. A ``hloscope report`` process made 14 such classes on its way (shapes, layouts,
windows, scores, advice, the module, its cost, its memory footprint), and its memory model's child 4 more: ~63 M
instructions of the parent, 6.7% of it, on the corpus's gemma4 module (benchmarks/README.md, stop 45).

The classes that every report makes derive from ``Record`` (mutable) or ``FrozenRecord`` instead, and write their
``__init__`` out (most as one call of ``_init_fields``); the methods a dataclass would generate from the fields are
written once here, reading the fields through one ``operator.attrgetter`` made per class:

* equality: an instance of the same class with equal compared fields (``NotImplemented`` for any other), as a
  dataclass compares (``eq=True``);
* ``hash`` of the compared fields' tuple for a ``FrozenRecord`` (as a frozen dataclass); a ``Record`` is
  unhashable (as a dataclass with ``eq=True`` and not frozen);
* ``repr``: ``Name(field=value, ...)`` of the shown fields, as a dataclass prints;
* a ``FrozenRecord``'s attributes are set once, in ``__init__`` (``object.__setattr__``); setting or deleting one
  after raises ``dataclasses.FrozenInstanceError`` (an ``AttributeError``), as for a frozen dataclass;
* pickling and ``copy``: a ``FrozenRecord``'s state is the list of its fields' values in order (what a frozen,
  slotted dataclass pickles).

A subclass declares its fields in ``__slots__`` (in order; or in ``_fields`` for a class that keeps a
``__dict__``) and may narrow ``_compared`` (default: every field) and ``_shown`` (default: the compared fields).
``dataclasses.fields``, ``replace`` and ``asdict`` do not apply to them; the few classes users derive variants of
(``ChipSpec``, ``Report``) stay dataclasses.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable, ClassVar

__all__ = ["FrozenRecord", "Record"]


def _values_getter(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    """The tuple of the attributes ``names`` of an object (a 1-tuple for one name, as a dataclass compares)."""
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return attrgetter(*names) if names else (lambda obj: ())


class Record:
    """Base of a mutable value class: equality and ``repr`` over its fields, unhashable (module docstring)."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _compared: ClassVar[tuple[str, ...]] = ()
    _shown: ClassVar[tuple[str, ...]] = ()
    _key: ClassVar[Callable[[Any], tuple]]
    _shown_values: ClassVar[Callable[[Any], tuple]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        fields = tuple(own.get("_fields") or own.get("__slots__") or cls._fields)
        compared = tuple(own.get("_compared") or fields)
        shown = tuple(own.get("_shown") or compared)
        cls._fields, cls._compared, cls._shown = fields, compared, shown
        cls._key = staticmethod(_values_getter(compared))
        cls._shown_values = staticmethod(_values_getter(shown))

    def _init_fields(self, *values: Any) -> None:
        """Set the fields, in order, to ``values``: the body of an ``__init__`` of a class made now and then (a
        class made per shape, buffer or allocation sets each field itself, without this loop), and of
        ``__setstate__``."""
        for name, value in zip(self._fields, values):
            object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._key(self) == self._key(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  (mutable and compared by value, as a dataclass with eq=True)

    def __repr__(self) -> str:
        pairs = ", ".join(f"{name}={value!r}" for name, value in zip(self._shown, self._shown_values(self)))
        return f"{type(self).__qualname__}({pairs})"


class FrozenRecord(Record):
    """Base of an immutable value class: ``Record`` plus a hash of the compared fields, no attribute set or
    deleted after ``__init__`` and pickling by the fields' values (module docstring)."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._key(self))

    def __setattr__(self, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __getstate__(self) -> list[Any]:
        return [getattr(self, name) for name in self._fields]

    def __setstate__(self, state: list[Any]) -> None:
        self._init_fields(*state)
