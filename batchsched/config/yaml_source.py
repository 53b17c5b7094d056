"""Where a config's YAML comes from: text or a file, decoded strictly, one document chosen.

Strict as kube's decoder: a key given twice in one mapping is an error, not "the last wins".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import yaml

from batchsched.config.errors import ConfigError, Issue, quote

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


class _StrictLoader(yaml.SafeLoader):
    """Rejects a key given twice in one mapping, as kube's strict decoding does."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[object, object]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, str) and key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
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
