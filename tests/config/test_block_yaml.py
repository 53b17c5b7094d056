"""The block reader builds what yaml.safe_load builds for kubectl's form of YAML, and says
Unsupported (never a wrong value) for anything else; kube_dump then reads it with PyYAML."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.configfile.block_yaml import BlockReader, Unsupported
from batchsched.configfile.kube_dump import DumpFileError, read_objects


def fast(text: str) -> list[object]:
    return list(BlockReader().documents(text))


def pyyaml(text: str) -> list[object]:
    return list(yaml.safe_load_all(text))


KUBECTL_FORMS = {
    "nested mappings": "a:\n  b:\n    c: d\n  e: f\ng: h\n",
    "a sequence at its key's indent": (
        "spec:\n  containers:\n  - name: a\n    image: x\n  - name: b\n"
    ),
    "a sequence indented under its key": "a:\n  - 1\n  - 2\nb: 3\n",
    "a sequence of scalars and a mapping after it": "args:\n- --v=2\n- run\nnext: 1\n",
    "an item that is a mapping with a nested list": "- a:\n  - 1\n  b: 2\n- c: 3\n",
    "empty values are null, {} and [] are empty": "a:\nb: {}\nc: []\nd: ~\ne: null\n",
    "quoted strings keep what looks like numbers": 'a: "8"\nb: \'1.5\'\nc: "true"\n',
    "a single-quoted string with a quote": "a: 'it''s'\n",
    "a double-quoted string with escapes": 'a: "tab\\tnew\\nline \\"q\\" \\u00e9"\n',
    "YAML 1.1 plain scalars": "a: yes\nb: off\nc: 0x1F\nd: 0755\ne: 1_000\nf: .inf\ng: -1\n",
    "timestamps and dates": "a: 2024-01-02T03:04:05Z\nb: 2024-01-02\n",
    "keys that resolve": "8080: a\ntrue: b\nnull: c\n",
    "plain strings with colons and hashes": "a: http://x:80/p#f\nb: ::1\nc: a:b\nd: -x\n",
    "a literal keeps one newline": (
        "data:\n  s: |\n    line 1\n      indented\n\n    line 3\n  t: 1\n"
    ),
    "a stripped literal": "s: |-\n  one\n  two\nt: 2\n",
    "an empty literal": "s: |\nt: 2\n",
    "a literal in a sequence": "- |\n  text\n- 2\n",
    "blank lines between keys": "a: 1\n\n\nb:\n\n  c: 2\n",
    "several documents, one empty": "a: 1\n---\n---\nb: 2\n",
    "a marker first": "---\na: 1\n",
    "a dash alone for a nested mapping": "-\n  a: 1\n- b\n",
    "a key with nothing after its colon at the end": "a: 1\nb:",
    "unicode": "name: caf\u00e9 \u2603\n",
    "quoted keys": "\"a b\": 1\n'8080': 2\n",
}


@pytest.mark.parametrize("text", KUBECTL_FORMS.values(), ids=KUBECTL_FORMS.keys())
def test_kubectl_forms_read_as_pyyaml_reads_them(text: str) -> None:
    assert fast(text) == pyyaml(text)


OTHER_FORMS = {
    "an anchor and an alias": "a: &x 1\nb: *x\n",
    "a flow mapping": "a: {b: 1}\n",
    "a flow sequence": "a: [1, 2]\n",
    "a plain scalar folded over two lines": "a: one\n  two\n",
    "a double-quoted scalar over two lines": 'a: "one\n  two"\n',
    "a comment": "# hello\na: 1\n",
    "a comment after a value": "a: 1 # one\n",
    "a tag": "a: !!str 1\n",
    "a folded scalar": "a: >\n  one\n",
    "a literal with an indentation indicator": "a: |2\n   one\n",
    "a merge key": "a: {}\n<<: {}\n",
    "a tab after the colon": "a:\t1\n",
    "a document marker with content": "--- a\n",
    "a carriage return": "a: 1\r\nb: 2\r\n",
    "a document end marker": "a: 1\n...\n",
    "an indented root": "  a: 1\n",
    "a scalar root": "hello\n",
    "an impossible date": "a: 2001-02-30\n",
}


@pytest.mark.parametrize("text", OTHER_FORMS.values(), ids=OTHER_FORMS.keys())
def test_other_forms_are_left_to_pyyaml(text: str) -> None:
    with pytest.raises(Unsupported):
        fast(text)


def test_an_item_of_a_list_in_another_form_is_read_by_pyyaml_and_the_rest_by_the_reader() -> None:
    text = (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- kind: Pod\n  metadata: {name: a, labels: {x: y}}\n"
        "- kind: Pod\n  metadata:\n    name: b\n"
        "- kind: Pod\n  spec:\n    containers:\n    - args: [a, b]\n      name: c\n"
        "metadata:\n  resourceVersion: ''\n"
    )
    reader = BlockReader()
    assert list(reader.documents(text)) == pyyaml(text)
    assert reader.fallbacks == 2


def test_an_item_pyyaml_cannot_read_alone_sends_the_whole_text_to_pyyaml() -> None:
    text = "items:\n- a: &x 1\n- b: *x\n  c: {d: 1}\n"
    with pytest.raises(Unsupported):
        fast(text)


def test_a_broken_dump_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "dump.yaml"
    path.write_text("items:\n- a: 1\n- b: [1, 2\n- c: 3\n")
    with pytest.raises(DumpFileError) as caught:
        list(read_objects(path))
    message = str(caught.value)
    assert message.startswith(f"{path}: not valid YAML: ")
    assert f'in "{path}", line 4' in message


def test_a_dump_with_an_odd_item_gives_the_objects_pyyaml_gives(tmp_path: Path) -> None:
    text = "kind: List\nitems:\n- kind: Pod\n  metadata: &m {name: a}\n- kind: Node\n"
    path = tmp_path / "dump.yaml"
    path.write_text(text)
    assert [obj for _, obj in read_objects(path)] == yaml.safe_load(text)["items"]


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.dates(),
    st.datetimes(timezones=st.just(datetime.UTC)),
    st.text(alphabet=st.sampled_from("ab -:#'\"\\é\t|>{}[],&*!%@`?~01.eEyYnN\n"), max_size=12),
)
KEYS = st.text(alphabet=st.sampled_from("ab-_./01yn"), min_size=1, max_size=8) | st.text(
    alphabet=st.sampled_from("a:#' -"), min_size=1, max_size=3
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(KEYS, VALUES, min_size=1, max_size=5))
def test_what_pyyaml_dumps_in_block_style_reads_back_the_same_or_is_left_to_pyyaml(
    data: dict[str, object],
) -> None:
    text = yaml.safe_dump(data, default_flow_style=False, width=10**6, allow_unicode=True)
    try:
        read = fast(text)
    except Unsupported:
        return
    assert read == pyyaml(text)
