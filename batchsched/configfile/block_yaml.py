"""A fast reader for the block YAML that `kubectl get -o yaml` prints.

libyaml scans fast, but PyYAML then builds a Python node, resolves a tag and constructs a
value for every scalar, ten times the work of reading the text: a 60 000-pod dump took 70 s.
kubectl prints a narrow form of YAML (go-yaml's emitter): block mappings and sequences, one
`key: value` per line, scalars plain or quoted on one line, `|` literals, `{}` and `[]` for
empty collections. This reader builds the same Python objects as `yaml.safe_load` for that
form in one pass over the lines, and raises `Unsupported` for anything else (anchors, tags,
flow collections, a scalar folded over lines, comments...): the caller then reads the text
with PyYAML, which reads it or says what is wrong with it. An item of a top-level sequence (a
List's `items`) that leaves the form is read by PyYAML alone and the pass goes on. Plain
scalars get PyYAML's own resolution (YAML 1.1: `yes` is true, `0x1F` an int), cached by text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, cast

import yaml

_MISSING: Final = object()
# First characters of a plain scalar that PyYAML may resolve to something but a string.
_RESOLVED_FIRST: Final = frozenset(
    ch for ch in yaml.SafeLoader.yaml_implicit_resolvers if ch is not None
)
# A key or value starting with one of these is not a plain scalar in kubectl's form.
_SPECIAL: Final = frozenset("[]{}&*!|>'\"%@`#?:,- \t")
_SIMPLE_TAGS: Final = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float", "null", "timestamp")
)
_STR_TAG: Final = "tag:yaml.org,2002:str"
# What PyYAML's reader refuses (or reads another way: a BOM, a carriage return).
_NOT_PLAIN_TEXT: Final = re.compile(
    "[^\x09\x0a\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
_ODD_ASCII: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_DOCUMENT_MARK: Final = re.compile("^---", re.MULTILINE)
_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CACHE_LIMIT: Final = 200_000

Container = dict[object, object] | list[object]
# The root-level sequence item being read: (its first line, the sequence's length before it,
# the sequence's index in the stack).
_Item = tuple[int, int, int]
_Pending = tuple[Container, object, int]  # a `key:` or `-` waiting for its value: where, depth


class Unsupported(Exception):
    """The text leaves kubectl's form; `line` (0-based) says where it was noticed."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line + 1}: {why}")
        self.line = line


class BlockReader:
    """Reads the documents of one text, keeping its plain scalars' values."""

    def __init__(self) -> None:
        # Text -> value of the keys and one-line scalars met so far (immutable values only).
        self._keys: dict[str, object] = {}
        self._scalars: dict[str, object] = {}
        self._resolver = yaml.SafeLoader("")
        self.fallbacks = 0  # items PyYAML read

    def documents(self, text: str) -> Iterator[object]:
        """Each `---`-separated document, None for an empty one, as yaml.load_all gives."""
        odd = (_ODD_ASCII if text.isascii() else _NOT_PLAIN_TEXT).search(text)
        if odd is not None:
            line = text.count("\n", 0, odd.start())
            raise Unsupported(line, f"character {odd.group()!r}, left to PyYAML")
        lines = text.split("\n")
        marks: list[int] = []
        counted = 0
        for mark in _DOCUMENT_MARK.finditer(text):
            marks.append((marks[-1] if marks else 0) + text.count("\n", counted, mark.start()))
            counted = mark.start()
        for i in marks:
            if lines[i].rstrip(" ") != "---":
                raise Unsupported(i, "a document marker with content after it")
        bounds = [-1, *marks, len(lines)]
        for k in range(len(bounds) - 1):
            first, end = bounds[k] + 1, bounds[k + 1]
            if k == 0 and not any(line.strip(" ") for line in lines[first:end]):
                continue  # before the first `---`: no document
            yield self.document(lines, first, end)

    def plain(self, text: str, i: int = -1) -> object:
        """A plain scalar's value, as SafeLoader resolves and constructs it."""
        if text[0] not in _RESOLVED_FIRST:
            return text
        resolve = self._resolver.resolve
        tag = resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
        if tag == _STR_TAG:
            return text
        if tag not in _SIMPLE_TAGS:  # `<<` (merge), `=` (value)
            raise Unsupported(i, f"{text!r} resolves to {tag}")
        try:
            return self._resolver.construct_object(yaml.ScalarNode(tag, text))
        except (ValueError, yaml.YAMLError) as err:  # 2001-02-30
            raise Unsupported(i, f"{text!r}: {err}") from err

    def document(self, lines: list[str], start: int, end: int) -> object:
        """The value of lines[start:end], one document."""
        first = start
        while first < end and not lines[first].strip(" "):
            first += 1
        if first == end:
            return None
        if lines[first][0] == " ":
            raise Unsupported(first, "an indented document root")
        root: Container = [] if lines[first][:2] in ("- ", "-") else {}
        # (depth, container) from the root in; the bottom entry stops the unwinding.
        stack: list[tuple[int, Container]] = [(-1, []), (0, root)]
        pending = self._read(lines, first, end, stack)
        if pending is not None:
            _settle(pending, -1, False, stack)
        return root

    def _read(
        self, lines: list[str], start: int, end: int, stack: list[tuple[int, Container]]
    ) -> _Pending | None:
        """One pass filling the containers on the stack; what still waits for a value at the
        end. A loop with locals, since it runs per line; a known key or scalar is looked up."""
        keys, scalars = self._keys, self._scalars
        pending: _Pending | None = None
        item: _Item | None = None
        skip = start
        for i in range(start, end):
            if i < skip:
                continue
            line = lines[i]
            stripped = line.lstrip(" ")
            if not stripped:
                continue
            depth = len(line) - len(stripped)
            dash = stripped[0] == "-" and stripped[1:2] in (" ", "")
            try:
                if pending is not None:
                    _settle(pending, depth, dash, stack)
                    pending = None
                top_depth, top = stack[-1]
                while top_depth > depth or (top_depth == depth and not dash and type(top) is list):
                    stack.pop()
                    top_depth, top = stack[-1]
                if top_depth != depth:
                    raise Unsupported(i, "a line deeper than its block (a folded scalar?)")
                if dash:
                    if type(top) is not list:
                        raise Unsupported(i, "a sequence item inside a mapping")
                    if not depth:
                        item = (i, len(top), len(stack) - 1)
                    stripped = stripped[2:]
                    key, sep, rest = stripped.partition(": ")
                    if (not sep and stripped[-1:] != ":") or stripped[:1] in ("'", '"'):
                        skip, pending = self._scalar_item(top, stripped, lines, i, end, depth)
                        continue
                    mapping: dict[object, object] = {}
                    top.append(mapping)
                    stack.append((depth + 2, mapping))
                    depth, top = depth + 2, mapping
                else:
                    item = item if depth else None  # a root-level key ends the root's item
                    key, sep, rest = stripped.partition(": ")
                if not sep:
                    key, rest = _bare_key(stripped, i)
                name = keys[key] if key in keys else self._key(key, i)
                if not rest:
                    pending = (top, name, depth)
                elif rest in scalars:
                    top[name] = scalars[rest]  # type: ignore[call-overload]
                else:
                    top[name], skip = self._value(rest, lines, i, end, depth)  # type: ignore[call-overload]
            except Unsupported:
                if item is None:
                    raise
                skip = self._read_item(lines, i, end, item, stack)
                pending = None
        return pending

    def _key(self, text: str, i: int) -> object:
        """A key not seen before: a one-line scalar (`_scalar`), remembered."""
        if not text or text[-1] in " \t":
            raise Unsupported(i, "an empty key, or spaces before its colon")
        name = self._scalar(text, i)
        if len(self._keys) < _CACHE_LIMIT:
            self._keys[text] = name
        return name

    def _scalar_item(
        self, top: list[object], text: str, lines: list[str], i: int, end: int, depth: int
    ) -> tuple[int, _Pending | None]:
        """Append the scalar after `- ` on line i (a `-` alone waits for what follows); the
        line to go on from, and what waits."""
        if text in self._scalars:
            top.append(self._scalars[text])
            return i + 1, None
        if not text.strip(" "):
            return i + 1, (top, None, depth)
        value, after = self._value(text, lines, i, end, depth)
        top.append(value)
        return after, None

    def _read_item(
        self,
        lines: list[str],
        at: int,
        end: int,
        item: _Item,
        stack: list[tuple[int, Container]],
    ) -> int:
        """PyYAML reads the root-level item at item[0], in place of what this reader made of
        it; the line after the item. Unsupported when PyYAML cannot read it alone."""
        start, length, level = item
        stop = start + 1
        while stop < end and lines[stop][:1] in ("", " "):
            stop += 1
        if at >= stop:
            raise Unsupported(at, "a line after the item that PyYAML would read")
        try:
            value = yaml.load("\n".join(lines[start:stop]), Loader=_LOADER)
        except yaml.YAMLError as err:  # an alias to an earlier item, or an error in it
            raise Unsupported(start, f"PyYAML cannot read the item alone: {err}") from err
        sequence = cast(list[object], stack[level][1])
        del sequence[length:]
        sequence.extend(cast(list[object], value))
        del stack[level + 1 :]
        self.fallbacks += 1
        return stop

    def _value(
        self, text: str, lines: list[str], i: int, end: int, depth: int
    ) -> tuple[object, int]:
        """The value written after `key: ` or `- ` on line i, seen for the first time (a
        one-line scalar is remembered); with the index of the line after it."""
        bare = text.rstrip(" \t")
        if bare == "{}":
            return {}, i + 1
        if bare == "[]":
            return [], i + 1
        if bare in ("|", "|-"):
            return _literal(lines, i + 1, end, depth, keep_newline=bare == "|")
        if not bare:
            raise Unsupported(i, "spaces after a key")
        value = self._scalar(bare, i)
        if len(self._scalars) < _CACHE_LIMIT:
            self._scalars[text] = value
        return value, i + 1

    def _scalar(self, text: str, i: int) -> object:
        first = text[0]
        if first == '"':
            return _double_quoted(text, i)
        if first == "'":
            inner = text[1:-1]
            if len(text) < 2 or text[-1] != "'" or "'" in inner.replace("''", ""):
                raise Unsupported(i, "a single-quoted scalar over several lines")
            return inner.replace("''", "'")
        plain_start = first in "-?:" and len(text) > 1 and text[1] not in " \t"
        if (not plain_start and first in _SPECIAL) or " #" in text or ": " in text:
            raise Unsupported(i, f"{text[:20]!r} is left to PyYAML")
        if text[-1] == ":":
            raise Unsupported(i, "a value ending with `:`")
        return self.plain(text, i)


def _settle(pending: _Pending, depth: int, dash: bool, stack: list[tuple[int, Container]]) -> None:
    """Give a `key:` (or `-`) its value from the next line: the block starting there when it
    is deeper (or, under a key, a sequence at the key's own depth); else null."""
    holder, key, at = pending
    value: Container | None = None
    if depth > at or (depth == at and dash and type(holder) is dict):
        value = [] if dash else {}
        stack.append((depth, value))
    if type(holder) is dict:
        holder[key] = value
    else:
        cast(list[object], holder).append(value)


def _bare_key(text: str, i: int) -> tuple[str, str]:
    """(key, "") of a `key:` line with the value on the lines after it."""
    if text[-1] != ":":
        raise Unsupported(i, "not a `key: value` line")
    return text[:-1], ""


def _double_quoted(text: str, i: int) -> str:
    inner = text[1:-1]
    if len(text) >= 2 and text[-1] == '"' and "\\" not in inner and '"' not in inner:
        return inner
    try:  # escapes: PyYAML reads the scalar alone
        value = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as err:
        raise Unsupported(i, "a double-quoted scalar over several lines") from err
    if not isinstance(value, str):
        raise Unsupported(i, "not one double-quoted scalar")
    return value


def _literal(
    lines: list[str], start: int, end: int, parent: int, keep_newline: bool
) -> tuple[str, int]:
    """A `|` (`|-`) literal: the lines deeper than its key, less the first one's indentation,
    with one final newline (none); and the line after it."""
    i = start
    body: list[str] = []
    block = -1
    while i < end:
        line = lines[i]
        stripped = line.lstrip(" ")
        if stripped:
            depth = len(line) - len(stripped)
            if depth <= parent:
                break
            if block < 0:
                block = depth
            elif depth < block:
                raise Unsupported(i, "a literal line less indented than its first")
        elif len(line) > max(block, parent + 1):
            raise Unsupported(i, "a literal's line of spaces only")
        body.append(line)
        i += 1
    while body and not body[-1].strip(" "):  # blank lines after it are not its own
        body.pop()
    if block < 0:
        return "", i
    text = "\n".join(line[block:] for line in body)
    return (text + "\n" if keep_newline else text), i
