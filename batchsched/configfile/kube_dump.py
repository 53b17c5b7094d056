"""The objects in a `kubectl get -o yaml` (or `-o json`) file, each with where it came from.

A file is `---`-separated documents, each an object or a List of them. JSON is read by the
json module; YAML by the block reader (block_yaml.py) when it is in kubectl's form, else by
PyYAML (libyaml's parser when PyYAML has it). `DumpFileError` names the file, and the line
where PyYAML says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Final

import yaml

from batchsched.configfile.block_yaml import BlockReader, Unsupported

# libyaml's parser when PyYAML was built with it: several times faster than PyYAML's own.
LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR, _MAP, _SEQ = (f"tag:yaml.org,2002:{t}" for t in ("str", "map", "seq"))


class DumpFileError(ValueError):
    pass


def read_objects(path: Path) -> Iterator[tuple[str, Mapping[str, object]]]:
    """Every object in the file, Lists opened, with "file#index" as its origin."""
    try:
        with path.open("rb") as stream:
            documents = _documents(stream)
    except OSError as err:
        raise DumpFileError(f"{path}: cannot read: {err.strerror or err}") from err
    except json.JSONDecodeError as err:
        raise DumpFileError(f"{path}: not valid JSON: {err}") from err
    except yaml.YAMLError as err:
        raise DumpFileError(f"{path}: not valid YAML: {err}") from err
    for i, doc in enumerate(documents):
        if not isinstance(doc, Mapping):
            raise DumpFileError(
                f"{path}: document {i}: expected a Kubernetes object, got {type(doc).__name__}"
            )
        if str(doc.get("kind", "")).endswith("List"):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise DumpFileError(f"{path}: document {i}: items must be a list")
            for j, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise DumpFileError(f"{path}: document {i} items[{j}]: expected an object")
                yield f"{path}#{i}.items[{j}]", item
        else:
            yield f"{path}#{i}", doc


def _documents(stream: IO[bytes]) -> list[object]:
    """The file's non-empty documents."""
    data = stream.read()
    if data.lstrip()[:1] == b"{":  # `kubectl get -o json`'s one object
        return [json.loads(data)]
    try:
        text = data.decode("utf-8")
        documents = list(BlockReader().documents(text.removeprefix("\ufeff")))
    except (UnicodeDecodeError, Unsupported):  # PyYAML reads it, or says what is wrong
        stream.seek(0)
        documents = list(_load_all(stream))
    return [d for d in documents if d is not None]


def _load_all(stream: IO[bytes]) -> Iterator[object]:
    """yaml.load_all's documents, built by `_plain` (see there)."""
    loader = LOADER(stream)
    try:
        while loader.check_node():
            node = loader.get_node()
            yield None if node is None else _plain(loader, node)
    finally:
        loader.dispose()


def _plain(loader: yaml.SafeLoader, node: yaml.Node) -> object:
    """The node as SafeLoader builds it, without its per-node generator machinery, which
    took most of the time on a 60 000-pod dump; anything but plain maps, lists and scalars
    (merge keys, sets) goes to the loader itself."""
    if isinstance(node, yaml.ScalarNode):
        return node.value if node.tag == _STR else loader.construct_object(node)
    if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
        return [_plain(loader, item) for item in node.value]
    if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
        pairs = node.value
        if all(key.tag == _STR for key, _ in pairs):
            return {key.value: _plain(loader, value) for key, value in pairs}
    return loader.construct_document(node)
