"""docs/producers stays true: every YAML example is read by batchsched the way its page says.

Every fenced yaml block of docs/producers/*.md is checked unless it holds a line
`# not checked: <why>`; those are only held to being YAML. In a checked block:

- every PodGroup parses with its API's parser (scheduler-plugins, upstream, Volcano), every
  KubeSchedulerConfiguration loads, every upstream PodGroup copies the policy of the Workload
  template it names when that Workload is on the page;
- every Pod, and every pod template of a Job, JobSet or RayCluster (made into a Pod), asks for
  gpu-scheduler, parses with `parse_pod` and joins exactly the gang the block's `# gang: <key>`
  line names (a Kueue member's group parses with `kueue_group`); a PodGroup in such a block is
  that gang, and the page defines every gang it names;
- a block marked `# refused: <why>` holds pods `parse_pod` refuses, and the output shown after
  it is what the refusal says.

A kind the test does not know fails: check it here, or mark its block as not checked.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import yaml

from batchsched.config import config_from_mapping
from batchsched.gang.encodings import kueue_group, parse_k8s_pod_group, parse_volcano_pod_group
from batchsched.gang.podgroup import PodGroupView, parse_pod_group, pod_group_of
from batchsched.model.errors import InvalidObject
from batchsched.model.gang_ref import GangApi, gang_refs, split_gang_key
from batchsched.model.pod import PodView, parse_pod
from batchsched.model.priority_class import parse_priority_class

DOCS = Path(__file__).resolve().parents[2] / "docs" / "producers"
PRODUCER_PAGES = (
    "pytorchjob.md",
    "jobset.md",
    "volcano-job.md",
    "kueue-plain-pods.md",
    "raycluster.md",
)
PAGES = ("README.md", *PRODUCER_PAGES)
SCHEDULER = "gpu-scheduler"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_NOT_CHECKED = re.compile(r"^\s*# not checked:(.*)$", re.MULTILINE)
_GANG = re.compile(r"^\s*# gang:(.*)$", re.MULTILINE)
_REFUSED = re.compile(r"^\s*# refused:(.*)$", re.MULTILINE)

Doc = Mapping[str, object]
GroupParser = Callable[[Doc], PodGroupView]

GROUP_PARSERS: dict[tuple[str, str], GroupParser] = {
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"): parse_pod_group,
    ("scheduling.k8s.io/v1alpha2", "PodGroup"): parse_k8s_pod_group,
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): parse_volcano_pod_group,
}
POD = ("v1", "Pod")
JOB = ("batch/v1", "Job")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
RAYCLUSTER = ("ray.io/v1", "RayCluster")
WORKLOAD = ("scheduling.k8s.io/v1alpha2", "Workload")
PRIORITY_CLASS = ("scheduling.k8s.io/v1", "PriorityClass")
CONFIG = ("kubescheduler.config.k8s.io/v1", "KubeSchedulerConfiguration")
KNOWN = {*GROUP_PARSERS, POD, JOB, JOBSET, RAYCLUSTER, WORKLOAD, PRIORITY_CLASS, CONFIG}


@dataclass(frozen=True)
class Block:
    page: str
    number: int  # among the page's yaml blocks, from 1
    text: str
    following: str  # the next fenced block of any language: a refusal's output

    @property
    def label(self) -> str:
        return f"{self.page} yaml block {self.number}"

    @property
    def not_checked(self) -> str | None:
        found = _NOT_CHECKED.search(self.text)
        return found.group(1).strip() if found else None

    @property
    def refused(self) -> bool:
        return _REFUSED.search(self.text) is not None

    @property
    def gang(self) -> str | None:
        found = _GANG.findall(self.text)
        assert len(found) <= 1, f"{self.label}: one `# gang:` line per block, got {found}"
        return found[0].strip() if found else None

    def documents(self) -> list[Doc]:
        docs = []
        for i, doc in enumerate(yaml.safe_load_all(self.text)):
            if doc is None:
                continue
            assert isinstance(doc, Mapping), f"{self.label}, document {i + 1}: not a mapping"
            assert isinstance(doc.get("apiVersion"), str) and isinstance(doc.get("kind"), str), (
                f"{self.label}, document {i + 1}: apiVersion and kind are required"
            )
            docs.append(doc)
        return docs


def read_blocks(page: str) -> list[Block]:
    fences = list(_FENCE.finditer((DOCS / page).read_text(encoding="utf-8")))
    found: list[Block] = []
    for i, fence in enumerate(fences):
        if fence.group(1) != "yaml":
            continue
        following = fences[i + 1].group(2) if i + 1 < len(fences) else ""
        found.append(Block(page, len(found) + 1, fence.group(2), following))
    return found


BLOCKS = [block for page in PAGES for block in read_blocks(page)]
CHECKED = [block for block in BLOCKS if block.not_checked is None]
SKIPPED = [block for block in BLOCKS if block.not_checked is not None]


def _labels(blocks: list[Block]) -> list[str]:
    return [block.label for block in blocks]


# Reading the documents


def kind_of(doc: Doc) -> tuple[str, str]:
    return str(doc["apiVersion"]), str(doc["kind"])


def _map(value: object, where: str) -> Mapping[str, object]:
    assert isinstance(value, Mapping), f"{where}: expected a mapping"
    return value


def _list(value: object, where: str) -> list[object]:
    assert isinstance(value, list), f"{where}: expected a list"
    return value


def pod_from_template(template: object, name: str, namespace: str) -> dict[str, object]:
    """The Pod a controller makes from a pod template (labels and spec as written)."""
    body = _map(template, f"pod template of {name}")
    meta = dict(_map(body.get("metadata") or {}, f"{name}: template metadata"))
    meta.update(name=name, namespace=namespace)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body.get("spec")}


def pods_of(doc: Doc) -> list[Doc]:
    """The Pod, or the pods made from each pod template of a Job, JobSet or RayCluster."""
    kind = kind_of(doc)
    if kind == POD:
        return [doc]
    meta = _map(doc.get("metadata"), "metadata")
    name, namespace = str(meta.get("name")), str(meta.get("namespace", "default"))
    spec = _map(doc.get("spec"), f"{name}: spec")
    templates: list[tuple[str, object]] = []
    if kind == JOB:
        templates.append((f"{name}-0", spec.get("template")))
    elif kind == JOBSET:
        for rjob in _list(spec.get("replicatedJobs"), f"{name}: replicatedJobs"):
            rjob = _map(rjob, f"{name}: replicatedJobs[]")
            job_spec = _map(_map(rjob.get("template"), "template").get("spec"), "template.spec")
            templates.append((f"{name}-{rjob.get('name')}-0-0", job_spec.get("template")))
    elif kind == RAYCLUSTER:
        head = _map(spec.get("headGroupSpec"), f"{name}: headGroupSpec")
        templates.append((f"{name}-head", head.get("template")))
        for group in _list(spec.get("workerGroupSpecs") or [], f"{name}: workerGroupSpecs"):
            group = _map(group, f"{name}: workerGroupSpecs[]")
            templates.append((f"{name}-{group.get('groupName')}-worker", group.get("template")))
    return [pod_from_template(t, pod_name, namespace) for pod_name, t in templates]


@cache
def priority_classes(page: str) -> dict[str, int]:
    """The PriorityClasses a page defines, for its pods' priorityClassName."""
    found = {}
    for block in read_blocks(page):
        for doc in block.documents():
            if kind_of(doc) == PRIORITY_CLASS:
                view = parse_priority_class(doc)
                found[view.name] = view.value
    return found


def groups_on(page: str) -> dict[str, PodGroupView]:
    """Every PodGroup of the page's checked blocks, by gang key."""
    return {
        group.key: group
        for block in read_blocks(page)
        if block.not_checked is None
        for doc in block.documents()
        if (parser := GROUP_PARSERS.get(kind_of(doc))) is not None
        for group in [parser(doc)]
    }


def gpu_pods(block: Block) -> Iterator[Doc]:
    for doc in block.documents():
        if kind_of(doc) in (POD, JOB, JOBSET, RAYCLUSTER):
            yield from pods_of(doc)


def scheduler_name(pod: Doc) -> object:
    return _map(pod.get("spec"), "pod spec").get("schedulerName")


def parsed(block: Block, pod: Doc) -> PodView:
    return parse_pod(pod, priority_classes(block.page))


# The pages


def test_every_page_is_there_and_each_producer_page_has_checked_examples() -> None:
    missing = [page for page in PAGES if not (DOCS / page).is_file()]
    assert not missing, f"pages missing from docs/producers: {missing}"
    unchecked = [page for page in PRODUCER_PAGES if not any(b.page == page for b in CHECKED)]
    assert not unchecked, f"pages with no checked yaml example: {unchecked}"


def test_the_index_links_every_producer_page() -> None:
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    assert all(f"]({page})" in index for page in PRODUCER_PAGES)


@pytest.mark.parametrize("block", BLOCKS, ids=_labels(BLOCKS))
def test_every_yaml_block_is_yaml_with_kinds(block: Block) -> None:
    assert block.documents(), f"{block.label}: no YAML document"


@pytest.mark.parametrize("block", SKIPPED, ids=_labels(SKIPPED))
def test_a_block_left_unchecked_says_why(block: Block) -> None:
    assert block.not_checked, f"{block.label}: `# not checked:` needs a reason"
    assert block.gang is None and not block.refused, f"{block.label}: unchecked, so no claims"


# The checked examples


@pytest.mark.parametrize("block", CHECKED, ids=_labels(CHECKED))
def test_every_object_of_a_checked_block_is_one_batchsched_reads(block: Block) -> None:
    for doc in block.documents():
        kind = kind_of(doc)
        assert kind in KNOWN, (
            f"{block.label}: {kind} is not checked by this test; check it here or mark the "
            "block `# not checked: <why>`"
        )
        parser = GROUP_PARSERS.get(kind)
        if parser is not None:
            group = parser(doc)  # InvalidObject names the bad field
            if block.gang is not None:
                assert group.key == block.gang, f"{block.label}: PodGroup {group.key}"
        elif kind == CONFIG:
            assert config_from_mapping(doc).build_profiles()
        elif kind == PRIORITY_CLASS:
            parse_priority_class(doc)


@pytest.mark.parametrize("block", CHECKED, ids=_labels(CHECKED))
def test_every_pod_asks_for_batchsched_and_joins_the_gang_its_block_names(block: Block) -> None:
    pods = list(gpu_pods(block))
    for pod in pods:
        name = _map(pod.get("metadata"), "metadata").get("name")
        assert scheduler_name(pod) == SCHEDULER, f"{block.label}: pod {name} is not ours"
    if block.refused or not pods:
        return
    assert block.gang is not None, f"{block.label}: pods, but no `# gang: <key>` line"
    for pod in pods:
        view = parsed(block, pod)
        assert pod_group_of(view) == block.gang, f"{block.label}: {view.key} joins another gang"
        api, _, name = split_gang_key(block.gang)
        if api is GangApi.KUEUE:
            assert kueue_group(view, name).min_member >= 1


@pytest.mark.parametrize("page", PAGES)
def test_every_gang_a_page_names_is_defined_there(page: str) -> None:
    """A Kueue group is defined by its pods; every other gang by a PodGroup on the page."""
    groups = groups_on(page)
    for block in read_blocks(page):
        if block.gang is None:
            continue
        api, _, _ = split_gang_key(block.gang)
        if api is not GangApi.KUEUE:
            assert block.gang in groups, f"{block.label}: no PodGroup {block.gang} on the page"
        has_members = any(True for _ in gpu_pods(block))
        assert has_members or block.gang in groups, f"{block.label}: names a gang, shows none"


@pytest.mark.parametrize("page", PAGES)
def test_the_members_of_a_kueue_group_agree_on_its_size(page: str) -> None:
    sizes: dict[str, set[int]] = {}
    for block in read_blocks(page):
        if block.gang is None or block.refused:
            continue
        api, _, name = split_gang_key(block.gang)
        if api is GangApi.KUEUE:
            for pod in gpu_pods(block):
                sizes.setdefault(block.gang, set()).add(
                    kueue_group(parsed(block, pod), name).min_member
                )
    assert all(len(found) == 1 for found in sizes.values()), sizes


@pytest.mark.parametrize("page", PAGES)
def test_an_upstream_podgroup_copies_the_workload_template_it_names(page: str) -> None:
    docs = [doc for b in read_blocks(page) if b.not_checked is None for doc in b.documents()]
    workloads = {
        str(_map(doc["metadata"], "metadata")["name"]): _map(doc["spec"], "Workload spec")
        for doc in docs
        if kind_of(doc) == WORKLOAD
    }
    for doc in docs:
        if kind_of(doc) != ("scheduling.k8s.io/v1alpha2", "PodGroup"):
            continue
        spec = _map(doc["spec"], "PodGroup spec")
        ref = _map(_map(spec.get("podGroupTemplateRef") or {}, "ref").get("workload") or {}, "")
        if ref.get("workloadName") not in workloads:
            continue
        templates = _list(workloads[str(ref["workloadName"])]["podGroupTemplates"], "templates")
        named = [
            t for t in templates if _map(t, "template").get("name") == ref["podGroupTemplateName"]
        ]
        assert len(named) == 1, f"{page}: template {ref['podGroupTemplateName']} not found"
        template = _map(named[0], "template")
        for field in ("schedulingPolicy", "schedulingConstraints", "priorityClassName"):
            assert spec.get(field) == template.get(field), f"{page}: PodGroup {field} differs"


REFUSED = [block for block in CHECKED if block.refused]


def test_there_is_an_example_of_a_refused_pod() -> None:
    assert REFUSED


@pytest.mark.parametrize("block", REFUSED, ids=_labels(REFUSED))
def test_a_pod_naming_two_gangs_is_refused_as_shown(block: Block) -> None:
    pods = list(gpu_pods(block))
    assert pods
    for pod in pods:
        meta = _map(pod.get("metadata"), "metadata")
        labels = {str(k): str(v) for k, v in _map(meta.get("labels") or {}, "labels").items()}
        notes = _map(meta.get("annotations") or {}, "annotations")
        annotations = {str(k): str(v) for k, v in notes.items()}
        group = _map(pod.get("spec"), "spec").get("schedulingGroup")
        scheduling_group = str(_map(group, "").get("podGroupName", "")) if group else ""
        refs = gang_refs(labels, annotations, scheduling_group)
        assert len(refs) == 2, f"{block.label}: a refused example names two gangs"
        with pytest.raises(InvalidObject) as refusal:
            parsed(block, pod)
        assert all(ref.api.title in str(refusal.value) for ref in refs)
        assert str(refusal.value) in block.following, (
            f"{block.label}: the output after it does not show {str(refusal.value)!r}"
        )


def test_the_index_event_is_the_informer_note_on_the_refused_pod() -> None:
    """What the pod informer's Event says (runtime/app_invalid.py) around the refusal."""
    (block,) = REFUSED
    pod = next(gpu_pods(block))
    with pytest.raises(InvalidObject) as refusal:
        parsed(block, pod)
    note = f"Pod left out of scheduling (the last good version is kept): {refusal.value}"
    assert note in block.following


def test_a_template_becomes_a_pod_with_its_labels_and_the_owner_namespace() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}},
    }
    (pod,) = pods_of(copy.deepcopy(job))
    assert pod["metadata"] == {"labels": {"a": "b"}, "name": "j-0", "namespace": "ns"}
