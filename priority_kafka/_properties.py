"""Settings given as text (a Java ``.properties`` file, ``-c KEY=VALUE``) turned into values.

A ``.properties`` file or a command line gives every value as a string; each client wants its
own types (kafka-python an ``int`` for ``max_poll_records``, ``True`` for
``enable_auto_commit``). The type of each setting is read from the client itself: its
``DEFAULT_CONFIG`` and the types its docstring documents, never from a list kept here. A key
no setting has is refused with the nearest one that exists.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import os
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeAlias

import attrs

from priority_kafka._checks import shown
from priority_kafka.errors import ConfigError

__all__ = [
    "BOOL",
    "INT",
    "INT_OR_TEXT",
    "NUMBER",
    "TEXT",
    "VERSION",
    "Kind",
    "Source",
    "attrs_kinds",
    "kafka_python_kinds",
    "load_properties",
    "nearest",
    "parse_properties",
    "typed",
    "typed_settings",
]

#: A mapping of settings, or the path of a Java ``.properties`` file holding them.
Source: TypeAlias = "Mapping[str, Any] | str | os.PathLike[str]"
#: How a setting given as text converts: one of the kinds below, a function of the text and
#: the key as given, or None for a setting no text can give (a callable, a class).
Kind: TypeAlias = "str | Callable[[str, str], Any] | None"

# The kinds of value a setting given as text converts to.
BOOL, INT, NUMBER, VERSION, INT_OR_TEXT, TEXT = (
    "bool", "int", "number", "version", "int or text", "text")

# The types kafka-python documents for settings that take a string (a default of None).
_TEXT_DOCS = ("", "str", "str or None", "str or gssapi.Name")
_PYTHON_KINDS: dict[Any, str] = {int: INT, bool: BOOL, str: TEXT, float: NUMBER}
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """The entries of ``text`` in Java ``.properties`` syntax (``java.util.Properties.load``).

    ``key=value``, ``key: value`` and ``key value``; lines whose first non-blank character is
    ``#`` or ``!`` are comments; a line ending in an odd number of backslashes continues on the
    next (whose leading blanks are dropped); ``\\t \\n \\r \\f \\uXXXX`` are escapes and any
    other escaped character stands for itself. A later entry replaces an earlier one.
    """
    entries: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        logical = line.lstrip(" \t\f")
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical):
            logical = logical[:-1] + next(lines, "").lstrip(" \t\f")
        key, value = _split_entry(logical)
        entries[_unescape(key)] = _unescape(value)
    return entries


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_entry(line: str) -> tuple[str, str]:
    """The raw key and value of one logical line (escapes still in)."""
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t\f":
            break
        index += 1
    key, rest = line[:index], line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        escaped = match[1]
        if escaped.startswith("u") and len(escaped) == 5:
            return chr(int(escaped[1:], 16))
        return _ESCAPES.get(escaped, escaped)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", replace, text, flags=re.S)


def load_properties(source: Source, what: str = "properties") -> dict[str, Any]:
    """A copy of ``source`` if it is a mapping, else the entries of the ``.properties`` file at
    that path (UTF-8); an unreadable file is a ConfigError naming it."""
    if isinstance(source, Mapping):
        return dict(source)
    if not isinstance(source, str | os.PathLike):
        raise ConfigError(
            f"{what!r} must be a mapping of settings or the path of a .properties file "
            f"(got {shown(source)})."
        )
    path = Path(source)
    try:
        return parse_properties(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the properties file {str(path)!r}: {exc}") from exc


def nearest(key: str, valid: Iterable[str], respell: bool = True, prefix: str = "") -> str:
    """``; did you mean 'x'?`` for the valid name closest to ``key``, or ``""`` when none is
    close. With ``respell``, names are compared and shown spelt as ``key`` is (dotted or
    underscored: kafka-python takes both); ``prefix`` is shown before the name."""
    dotted = "." in key
    spelt = {(name.replace("_", ".") if dotted else name.replace(".", "_")) if respell else name
             for name in valid}
    match = difflib.get_close_matches(key, sorted(spelt), n=1, cutoff=0.7)
    return f"; did you mean {prefix + match[0]!r}?" if match else ""


def typed(key: str, value: Any, kind: Kind) -> Any:
    """``value`` as the ``kind`` of its setting when it is a string (the text of a
    ``.properties`` file or a command line); any other value unchanged. ``kind`` None: the
    setting cannot be given as text (a callable, a class), which a string is refused for."""
    if not isinstance(value, str) or kind == TEXT:
        return value
    if callable(kind):
        return kind(value, key)
    text = value.strip()
    if kind == BOOL:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(f"{key!r} must be true or false (got {shown(value)}).")
    if kind in (INT, INT_OR_TEXT):
        try:
            return int(text)
        except ValueError:  # also for more than 4300 digits
            if kind == INT_OR_TEXT:
                return value
            raise ConfigError(f"{key!r} must be an integer (got {shown(value)}).") from None
    if kind == NUMBER:
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if math.isnan(number):
            raise ConfigError(f"{key!r} must be a number (got {shown(value)}).")
        return number
    if kind == VERSION:  # kafka-python's api_version: "3.6" -> (3, 6)
        try:
            return tuple(int(part) for part in text.split("."))
        except ValueError:
            raise ConfigError(
                f"{key!r} must be a version such as 3.6 (got {shown(value)}).") from None
    raise ConfigError(f"{key!r} cannot be given as text (got {shown(value)}).")


@functools.cache
def kafka_python_kinds(client: type) -> dict[str, Kind]:
    """The kind of each setting of a kafka-python client class (``KafkaConsumer``,
    ``KafkaProducer``): the type of its default in ``DEFAULT_CONFIG`` or, for a default of
    None, the type its docstring documents (``receive_buffer_bytes (int): ...``)."""
    return _kinds(getattr(client, "DEFAULT_CONFIG", {}), client.__doc__ or "")


def signature_kinds(client: type) -> dict[str, Kind]:
    """:func:`kafka_python_kinds` of a client class whose settings are its constructor's
    keyword arguments (aiokafka's ``AIOKafkaConsumer``, ``AIOKafkaProducer``)."""
    parameters = inspect.signature(client).parameters.values()
    return _kinds({
        p.name: p.default for p in parameters
        if p.kind is p.KEYWORD_ONLY or (p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "self")
    }, client.__doc__ or "")


def _kinds(defaults: Mapping[str, Any], doc: str) -> dict[str, Kind]:
    documented = dict(re.findall(r"^\s+(\w+) \(([^)]*)\):", doc, re.M))
    kinds: dict[str, Kind] = {}
    for name, default in defaults.items():
        doc = documented.get(name, "")
        if isinstance(default, bool) or doc == "bool":
            kinds[name] = BOOL
        elif isinstance(default, float) or doc in ("float", "numeric"):
            kinds[name] = NUMBER  # consumer_timeout_ms (inf), retries (inf)
        elif re.fullmatch(r"\d+(, \d+)*, '\w+'", doc):  # acks: 0, 1, 'all'
            kinds[name] = INT_OR_TEXT
        elif isinstance(default, int) or doc == "int":
            kinds[name] = INT
        elif doc == "tuple" and default is None:
            kinds[name] = VERSION
        elif isinstance(default, str) or (default is None and doc in _TEXT_DOCS):
            kinds[name] = TEXT
        else:
            kinds[name] = None  # a callable, a class, a list of objects
    return kinds


def attrs_kinds(cls: type) -> dict[str, Kind]:
    """The kind of each field of an attrs class, from its annotation (``int``, ``bool``,
    ``str``, each optionally ``| None``); any other field cannot be given as text."""
    kinds: dict[str, Kind] = {}
    for field in attrs.fields(attrs.resolve_types(cls)):
        union = typing.get_origin(field.type) in (typing.Union, types.UnionType)
        options = [t for t in typing.get_args(field.type) if t is not type(None)] if union \
            else [field.type]
        kinds[field.name] = _PYTHON_KINDS.get(options[0]) if len(options) == 1 else None
    return kinds


def typed_settings(
    configs: Mapping[str, Any], kinds: Mapping[str, Kind],
    unknown: tuple[type[Exception], str] | None = None,
) -> dict[str, Any]:
    """A copy of ``configs`` with each string value typed by the kind of its setting (its key
    with ``.`` as ``_`` in ``kinds``). With ``unknown`` (an exception class, and whose settings
    these are), a key of no setting raises it naming the key as given and the nearest setting;
    without, such a key is kept as it is."""
    result: dict[str, Any] = {}
    for key, value in configs.items():
        name = key.replace(".", "_") if isinstance(key, str) else key
        if name in kinds:
            result[key] = typed(key, value, kinds[name])
        elif unknown is not None and isinstance(key, str):
            error, what = unknown
            raise error(f"{key!r} is not a {what} setting{nearest(key, kinds)}")
        else:
            result[key] = value
    return result
