"""Where a config's YAML comes from: text or a file, decoded strictly, one document chosen.

Strict as kube's decoder: a key given twice in one mapping is an error, not "the last wins".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import yaml

from batchsched.configfile.errors import ConfigError, Issue, quote

logger = logging.getLogger(__name__)


def read_source(source: str | Path) -> tuple[str, str]:
    """(text, file name or "") — a one-line string naming an existing file is a path."""
    if not isinstance(source, Path) and not _names_a_file(source):
        return str(source), ""
    try:
        return Path(source).read_text(encoding="utf-8"), str(source)
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError([Issue("", f"cannot read the file: {err}")], str(source)) from err


def _names_a_file(text: str) -> bool:
    try:
        return "\n" not in text and Path(text).is_file()
    except (OSError, ValueError):  # too long for a file name, or a NUL byte in it
        return False


# Bounds on what one document may make the loader build. No config nests beyond a dozen
# levels, and the deepest PyYAML composes before Python's recursion limit is some 300. A few
# anchors that alias each other ("billion laughs") expand to millions of values for the
# validation to walk: like go-yaml, refuse a document whose aliases expand it that far.
MAX_DEPTH: Final = 100
MAX_EXPANDED_NODES: Final = 100_000


class _StrictLoader(yaml.SafeLoader):
    """Rejects a key given twice in one mapping, as kube's strict decoding does; bounds depth
    and alias expansion; and reports a scalar its constructor cannot read (`!!int x`,
    `2001-02-30`) as a YAML error at its line, not as whatever the constructor raised."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._expanded = 0  # nodes so far, each alias counted as a copy of its anchor
        self._sizes: dict[int, int] = {}  # id(anchored node) -> its expanded size

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        mark = event.start_mark if isinstance(event.start_mark, yaml.error.Mark) else None
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:
                raise _error("an alias inside its own anchor", mark)
            self._count(size, mark)
            return node
        if self._depth >= MAX_DEPTH:
            raise _error(f"nested deeper than {MAX_DEPTH} levels", mark)
        self._depth += 1
        before = self._expanded
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        self._count(1, mark)
        if getattr(event, "anchor", None) is not None:
            self._sizes[id(node)] = self._expanded - before
        return node

    def _count(self, nodes: int, mark: yaml.error.Mark | None) -> None:
        self._expanded += nodes
        if self._expanded > MAX_EXPANDED_NODES:
            raise _error(f"aliases expand it past {MAX_EXPANDED_NODES} values", mark)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> object:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, AttributeError, OverflowError) as err:
            tag = str(node.tag).rsplit(":", 1)[-1]
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read this {tag}: {err}", node.start_mark
            ) from None


def _error(problem: str, mark: yaml.error.Mark | None) -> yaml.composer.ComposerError:
    return yaml.composer.ComposerError(None, None, f"document refused: {problem}", mark)


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[object, object]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, str) and key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        if isinstance(key, str):
            seen.add(key)  # construct_mapping below refuses a key that cannot be one
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str) -> list[object]:
    """Every non-empty document in the text."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=_StrictLoader) if doc is not None]
    except yaml.YAMLError as err:
        raise ConfigError.at("", f"invalid YAML: {err}") from None


def single_document(documents: list[object], kind: str) -> Mapping[str, object]:
    """The one document of `kind`; other kinds in a multi-document file are skipped."""
    if len(documents) > 1:
        configs: list[object] = [
            d for d in documents if isinstance(d, dict) and d.get("kind") == kind
        ]
        if len(configs) != 1:
            raise ConfigError.at(
                "",
                f"{len(documents)} YAML documents, {len(configs)} of kind {kind}; "
                "expected exactly one",
            )
        logger.warning("skipping YAML documents of other kinds count=%d", len(documents) - 1)
        documents = configs
    if not documents:
        raise ConfigError.at("", f"no {kind} found: the YAML is empty")
    document = documents[0]
    if not isinstance(document, dict):
        hint = " (no such file)" if isinstance(document, str) and " " not in document else ""
        raise ConfigError.at("", f"expected a {kind} mapping, got {quote(document)}{hint}")
    return document
