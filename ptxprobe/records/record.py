"""A typed record and its JSON: one way to read a document (``from_json``: every field checked against its type, an
older layout upgraded first), one way to write it (``to_json``), one schema (``schema``) that docs/schema.md shows.

A record is a frozen dataclass whose fields say what each key of its file holds. The types a field may have: ``str``,
``int``, ``float``, ``bool``, another record, ``tuple[T, ...]`` (a JSON list), ``X | None``, and ``Json``: a part kept
as parsed, whose shape the stage that writes it owns (a race's standings, a proof's interval). Absent and null are
the same value (None). A key the record does not name is refused: what a file holds is what its record says.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union

from ptxprobe import __version__
from ptxprobe.core.cache import atomic_write
from ptxprobe.core.errors import PtxprobeError

Json = Any  # a JSON value kept as parsed (object, list, string, number, true/false, null)
R = TypeVar("R", bound="Record")
_JSON_TYPE = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
              bool: "true/false", type(None): "null"}


class DamagedRecord(PtxprobeError):
    """A record ptxprobe cannot read (bad input: exit 2): the file, the key and the fault named."""


def json_type(value) -> str:
    return _JSON_TYPE.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class FieldSchema:
    """One key of a record's file: its name, its type as docs/schema.md writes it, why it is there."""

    name: str
    type: str
    doc: str
    required: bool


@dataclass(frozen=True)
class Record:
    """Base of every record a run directory holds. ``FILE``: the name it is kept under; ``SCHEMA_VERSION``: the layout
    it writes (``schema_version`` in its file where ``VERSIONED``); ``upgrade`` turns an older layout into this one."""

    FILE: ClassVar[str] = ""
    SCHEMA_VERSION: ClassVar[int] = 1
    VERSIONED: ClassVar[bool] = False  # the file carries ``schema_version`` (records nested in another do not)

    @classmethod
    def upgrade(cls, doc: dict, version: int, where: str) -> dict:
        """The keys of layout ``version`` (``schema_version`` taken out) as this layout names them (the base: every
        layout it has known names them alike)."""
        return doc

    @classmethod
    def _upgraded(cls, doc, where: str) -> dict:
        """``doc`` in this layout: its ``schema_version`` checked and taken out, an older layout's keys upgraded."""
        if not isinstance(doc, dict):
            raise DamagedRecord(f"{where}: {json_type(doc)}, expected an object ({cls.__name__})")
        doc = dict(doc)
        version = _version_checked(cls, doc.pop("schema_version", 1), where) if cls.VERSIONED else cls.SCHEMA_VERSION
        return cls.upgrade(doc, version, where)

    @classmethod
    def from_json(cls: type[R], doc, where: str = "") -> R:
        """The record ``doc`` holds, upgraded and checked; DamagedRecord names the key and the fault."""
        where = where or cls.__name__
        return cls._built(cls._upgraded(doc, where), where)

    @classmethod
    def _built(cls: type[R], doc: dict, where: str) -> R:
        """The record of a document already in this layout: every key a field, every value of its field's type."""
        names = _field_types(cls)
        unknown = sorted(set(doc) - set(names))
        if unknown:
            raise DamagedRecord(f"{where}: {', '.join(map(repr, unknown[:5]))} not a field of {cls.__name__} "
                                f"(schema version {cls.SCHEMA_VERSION}; docs/schema.md lists its fields)")
        values = {}
        for f in fields(cls):
            value = doc.get(f.name)
            if value is None:
                if f.default is MISSING and f.default_factory is MISSING:
                    raise DamagedRecord(f"{where}: no \"{f.name}\" ({cls.__name__} always has it)")
                continue
            values[f.name] = _converted(value, names[f.name], f"{where}: \"{f.name}\"")
        return cls(**values)

    @classmethod
    def of(cls: type[R], doc: dict, where: str = "") -> R:
        """The record a stage's document built in memory (tuples, paths) makes, read as its file will hold it: in
        today's layout, so a key the record does not name fails here rather than pass as an older layout's."""
        current = {"schema_version": cls.SCHEMA_VERSION} if cls.VERSIONED else {}
        return cls.from_json(json.loads(json.dumps({**doc, **current}, default=str)), where)

    @classmethod
    def checked(cls, doc, where: str = "") -> dict:
        """``doc`` in this layout, checked against the record, with the keys it had (absent stays absent): for
        readers that take a document as a mapping."""
        where = where or cls.__name__
        doc = cls._upgraded(doc, where)
        cls._built(doc, where)
        return doc

    def to_json(self) -> dict:
        """The record as its file holds it (tuples as lists, nested records as objects, every field named)."""
        out = {"schema_version": self.SCHEMA_VERSION} if self.VERSIONED else {}
        out.update({f.name: _plain(getattr(self, f.name)) for f in fields(self)})
        return out

    def write(self, directory: str | Path) -> Path:
        """The record written atomically as ``directory/FILE``."""
        path = Path(directory) / self.FILE
        atomic_write(path, (json.dumps(self.to_json(), indent=1, default=str) + "\n").encode())
        return path

    @classmethod
    def schema(cls) -> tuple[FieldSchema, ...]:
        hints = _field_types(cls)
        return tuple(FieldSchema(f.name, type_text(hints[f.name]), f.metadata.get("doc", ""),
                                 f.default is MISSING and f.default_factory is MISSING) for f in fields(cls))


def doc(text: str, default=None, **kw):
    """A record field with its documentation (docs/schema.md); optional (None) unless ``default`` says otherwise."""
    return field(default=default, metadata={"doc": text}, **kw)


def required(text: str):
    """A record field its file always holds."""
    return field(metadata={"doc": text})


def _version_checked(cls: type[Record], version, where: str) -> int:
    """A file's ``schema_version`` (1 where it names none), refused when it is no layout number or a newer one."""
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise DamagedRecord(f"{where}: schema_version {version!r} is not a layout number (1 to {cls.SCHEMA_VERSION})")
    if version > cls.SCHEMA_VERSION:
        raise DamagedRecord(f"{where}: schema_version {version} was written by a newer ptxprobe (this one, "
                            f"{__version__}, reads layouts up to {cls.SCHEMA_VERSION}); upgrade ptxprobe to read it")
    return version


@cache
def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _converted(value, hint, where: str):
    """``value`` as ``hint`` holds it, or DamagedRecord naming ``where``."""
    if hint is Json:
        return value
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        faults = []
        for option in options:
            try:
                return _converted(value, option, where)
            except DamagedRecord as exc:
                faults.append(exc)
        raise faults[-1] if len(options) == 1 else DamagedRecord(
            f"{where} is {json_type(value)}, expected {type_text(hint)}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise DamagedRecord(f"{where} is {json_type(value)}, expected a list")
        (item, _) = typing.get_args(hint)
        return tuple(_converted(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise DamagedRecord(f"{where} is {json_type(value)}, expected an object")
        return value
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.from_json(value, where)
    ok = isinstance(value, int | float) and not isinstance(value, bool) if hint is float else (
        isinstance(value, hint) and not (hint is int and isinstance(value, bool)))
    if not ok:
        raise DamagedRecord(f"{where} is {json_type(value)}, expected {_JSON_TYPE.get(hint, hint.__name__)}")
    return float(value) if hint is float else value


def _plain(value):
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def type_text(hint) -> str:
    """A field's type as docs/schema.md writes it: ``str``, ``list of TunedKernel``, ``int or null``, ``JSON``."""
    if hint is Json:
        return "JSON"
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return " or ".join("null" if a is type(None) else type_text(a) for a in typing.get_args(hint))
    if origin is tuple:
        return f"list of {type_text(typing.get_args(hint)[0])}"
    if origin is dict:
        return "object"
    return hint.__name__
