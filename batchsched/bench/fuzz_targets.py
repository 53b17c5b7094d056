"""Every parser at the edge with its contract: for any input it returns its view or raises its
documented error type, with a message that says what is wrong.

A `Target` knows how to make a valid input, a mutated one and a random one, how to run the
parser (as far as the live scheduler takes a fresh object: a Node also gets its GPU topology
derived, as the snapshot does), and which exceptions are the documented rejections. `check`
runs one case and says which of the three things happened. Purely computational.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Final

import yaml

from batchsched.bench import fuzz_objects as objects
from batchsched.bench.fuzz_inputs import (
    NASTY_STRINGS,
    Json,
    deep_nesting,
    mutate,
    mutate_fields,
    nasty_scalar,
    quantity_text,
    random_json,
    random_text,
)
from batchsched.config.documents import KIND as CONFIG_KIND
from batchsched.config.errors import ConfigError
from batchsched.config.scheduler_config import config_from_mapping
from batchsched.config.yaml_source import parse_yaml, single_document
from batchsched.expected_runtime import InvalidRuntime, expected_runtime
from batchsched.gang.podgroup import parse_pod_group
from batchsched.kube.disruption import parse_disruption_budget
from batchsched.model.errors import InvalidObject
from batchsched.model.node import parse_node
from batchsched.model.pod import PodView, parse_pod
from batchsched.model.priority_class import parse_priority_class
from batchsched.model.quantity import QuantityError, parse_quantity, resource_amount
from batchsched.model.resources import NVIDIA_GPU, Resources
from gpu.discovery import topology_for
from gpu.nrt import parse_nrt
from gpu.requests import InvalidGpuRequest, gpu_request
from queues.config import QuotaConfigError, parse_quota_config, policy_from_mapping

__all__ = ["TARGETS", "Outcome", "Target", "check", "generate"]


class Outcome(Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"  # the documented error, with a message
    ESCAPED = "escaped"  # anything else: a bug


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    valid: Callable[[random.Random], object]
    parse: Callable[[object], object]
    errors: tuple[type[Exception], ...]
    mutated: Callable[[random.Random, object], object] = mutate
    random: Callable[[random.Random], object] = random_json


def generate(target: Target, rng: random.Random) -> object:
    """One input: a tenth valid, seven tenths a mutated valid one, a fifth random."""
    roll = rng.random()
    if roll < 0.1:
        return target.valid(rng)
    if roll < 0.8:
        return target.mutated(rng, target.valid(rng))
    return target.random(rng)


def check(target: Target, value: object) -> tuple[Outcome, BaseException | None]:
    """Run the parser once. A documented error must carry a message naming what is wrong
    (for a Kubernetes object, also the field)."""
    try:
        target.parse(value)
    except target.errors as err:
        if not str(err).strip() or (isinstance(err, InvalidObject) and not err.field):
            return Outcome.ESCAPED, err
        return Outcome.REJECTED, err
    except Exception as err:  # what the fuzzing is for: anything else escaped
        return Outcome.ESCAPED, err
    return Outcome.ACCEPTED, None


# Kubernetes objects, as the informers hand them over.


def _object(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise TypeError("the informer hands parsers only mappings")  # never generated so
    return value


def _random_object(rng: random.Random) -> object:
    value = random_json(rng)
    return value if isinstance(value, dict) else {"metadata": value}


def _node(value: object) -> object:
    return topology_for(parse_node(_object(value)))  # the snapshot derives it at once


# Annotations read after parsing, from the view.

_BASE_POD: Final = parse_pod({"metadata": {"name": "p", "namespace": "default"}})
_BASE_NODE: Final = parse_node({"metadata": {"name": "n"}})


def _annotation_value(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(NASTY_STRINGS)
    if roll < 0.8:
        return quantity_text(rng)
    return random_text(rng)


def _pod_annotations(rng: random.Random) -> dict[str, object]:
    keys = [k for k in objects.GPU_ANNOTATIONS if rng.random() < 0.6]
    return {
        "annotations": {k: _annotation_value(rng) for k in keys},
        "gpus": rng.choice((0, 0, 1, 8, -1, 2**63)),
        "deadline": rng.choice((None, 0, -1, 3600, 2**63)),
    }


def _pod_annotations_valid(rng: random.Random) -> object:
    share = rng.random() < 0.5
    annotations = {
        "batchsched.io/gpu-models": "NVIDIA-H100-80GB-HBM3|NVIDIA-A100-SXM4-80GB",
        "batchsched.io/gpu-connectivity": rng.choice(("NVLink", "PCIeSwitch", "Socket")),
        "batchsched.io/expected-runtime": rng.choice(("90m", "2h30m", "45s")),
    }
    if share:
        annotations["batchsched.io/gpu-milli"] = str(rng.randint(1, 999))
    return {"annotations": annotations, "gpus": 0 if share else 8, "deadline": 3600}


def _pod_annotations_mutated(rng: random.Random, value: object) -> object:
    return _pod_annotations(rng)


def _gpu_annotations(value: object) -> object:
    case = _object(value)
    annotations = case["annotations"]
    gpus, deadline = case["gpus"], case["deadline"]
    assert isinstance(annotations, dict) and isinstance(gpus, int)
    assert deadline is None or isinstance(deadline, int)
    pod: PodView = dataclasses.replace(
        _BASE_POD,
        annotations=annotations,
        requests=Resources(scalar={NVIDIA_GPU: gpus}),
        active_deadline_seconds=deadline,
    )
    gpu_request(pod)
    return expected_runtime(pod.annotations, pod.active_deadline_seconds)


def _node_annotations(rng: random.Random) -> object:
    parts = [_annotation_value(rng) for _ in range(rng.randint(0, 4))]
    return {
        "unhealthy": ",".join(parts),
        "product": rng.choice(("NVIDIA-H100-80GB-HBM3", "", "💥", random_text(rng))),
        "gpus": rng.choice((0, 1, 8, 300, 10**6, 10**18, 2**63)),
    }


def _node_annotations_mutated(rng: random.Random, value: object) -> object:
    return _node_annotations(rng)


def _node_gpu_topology(value: object) -> object:
    case = _object(value)
    unhealthy, product, gpus = case["unhealthy"], case["product"], case["gpus"]
    assert isinstance(unhealthy, str) and isinstance(product, str) and isinstance(gpus, int)
    node = dataclasses.replace(
        _BASE_NODE,
        labels={"nvidia.com/gpu.product": product},
        annotations={"batchsched.io/unhealthy-gpus": unhealthy},
        allocatable=Resources(scalar={NVIDIA_GPU: gpus}),
    )
    return topology_for(node)


# Quantities, as written anywhere.


def _quantity_valid(rng: random.Random) -> object:
    return rng.choice(("100m", "1.5Gi", "1e3", "64", 8, 0.5, "2Ki", "1E", "16Ei"))


def _quantity_mutated(rng: random.Random, value: object) -> object:
    return quantity_text(rng) if rng.random() < 0.7 else nasty_scalar(rng)


def _quantity(value: object) -> object:
    if not isinstance(value, str | int | float):
        return parse_quantity(value, "q")  # type: ignore[arg-type]  # YAML hands these over too
    parse_quantity(value, "q")
    return resource_amount("cpu", value, "q") + resource_amount("memory", value, "q")


# Configuration files, as text (what a file or a ConfigMap holds) and as a parsed mapping.

_TEXT_EDITS: Final = (
    "\t",
    ": :",
    "- -",
    "&a [1, 2]",
    "*a",
    "*nowhere",
    "!!python/object:os.system x",
    "!!int x",
    "!!float x",
    "!!binary x",
    "!!set {a}",
    "!!timestamp 2001-02-30",
    "0x_",
    "2001-02-30",
    "2001-01-01 00:00:00 +25:00",
    "? [a]\n: b",
    "? {a: 1}\n: b",
    "{<<: 5}",
    "1" * 4400,
    "[" * 300,  # past the loader's depth bound (PyYAML's scanner is slow on deeper flows)
    "{a: " * 300,
    "\x00",
    "\ufeff",
    "%YAML 9.9",
    "---",
    "...",
)


def _dump(document: Json) -> str:
    try:
        return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    except (RecursionError, yaml.YAMLError):
        return "a: " + "[" * 300  # deeper than the loader takes, like the undumpable document


def _edit_text(rng: random.Random, text: str) -> str:
    at = rng.randint(0, len(text))
    roll = rng.random()
    if roll < 0.2:
        return text[:at]  # cut off, as a half-written file
    if roll < 0.3:
        lines = text.splitlines(keepends=True)
        line = rng.choice(lines) if lines else "a: 1\n"
        return text + line  # a key given twice, or a list item
    return text[:at] + rng.choice(_TEXT_EDITS) + text[at:]


def _text_target(
    name: str,
    valid: Callable[[random.Random], Json],
    parse: Callable[[object], object],
    error: type[Exception],
) -> Target:
    def valid_text(rng: random.Random) -> object:
        return _dump(valid(rng))

    def mutated_text(rng: random.Random, value: object) -> object:
        if rng.random() < 0.5:
            return _dump(mutate(rng, valid(rng)))
        return _edit_text(rng, str(value))

    def random_text_doc(rng: random.Random) -> object:
        roll = rng.random()
        if roll < 0.6:
            return _dump(random_json(rng))
        if roll < 0.8:
            return _dump(deep_nesting(rng))
        return random_text(rng, 200)

    return Target(name, valid_text, parse, (error,), mutated_text, random_text_doc)


def _quota_text(value: object) -> object:
    return parse_quota_config(str(value), "quota.yaml")


def _quota_mapping(value: object) -> object:
    return policy_from_mapping(_object(value), "quota.yaml")


def _config_text(value: object) -> object:
    document = single_document(parse_yaml(str(value)), CONFIG_KIND)
    return _config_mapping(document)


def _config_mapping(value: object) -> object:
    # As the CLI and the app do: the profiles are built (plugin args reach the plugins) too.
    return config_from_mapping(_object(value)).build_profiles()


def _kube(
    name: str, valid: Callable[[random.Random], Json], parse: Callable[[object], object]
) -> Target:
    # The informer hands its parsers only mappings (decode_event checks), so random JSON
    # arrives as an object whose fields are random.
    return Target(name, valid, parse, (InvalidObject,), mutate_fields, _random_object)


@cache
def _targets() -> tuple[Target, ...]:
    return (*_kube_targets(), *_annotation_targets(), *_config_targets())


def _kube_targets() -> tuple[Target, ...]:
    """The API objects the informers parse."""
    return (
        _kube("Pod", objects.valid_pod, lambda v: parse_pod(_object(v))),
        _kube("Node", objects.valid_node, _node),
        _kube(
            "PriorityClass",
            objects.valid_priority_class,
            lambda v: parse_priority_class(_object(v)),
        ),
        _kube("PodGroup", objects.valid_pod_group, lambda v: parse_pod_group(_object(v))),
        _kube(
            "PodDisruptionBudget",
            objects.valid_disruption_budget,
            lambda v: parse_disruption_budget(_object(v)),
        ),
        _kube("NodeResourceTopology", objects.valid_nrt, lambda v: parse_nrt(_object(v))),
    )


def _annotation_targets() -> tuple[Target, ...]:
    """Quantities and the annotations batchsched reads off pods and nodes."""
    return (
        Target(
            "quantity",
            _quantity_valid,
            _quantity,
            (QuantityError,),
            _quantity_mutated,
            nasty_scalar,
        ),
        Target(
            "pod-annotations",
            _pod_annotations_valid,
            _gpu_annotations,
            (InvalidGpuRequest, InvalidRuntime),
            _pod_annotations_mutated,
            _pod_annotations,
        ),
        Target(
            "node-annotations",
            _node_annotations,
            _node_gpu_topology,
            (),  # advisory: a bad entry is ignored, never an error
            _node_annotations_mutated,
            _node_annotations,
        ),
    )


def _config_targets() -> tuple[Target, ...]:
    """The quota file and the scheduler configuration, as YAML text and as mappings."""
    return (
        _text_target("QuotaConfig", objects.valid_quota_document, _quota_text, QuotaConfigError),
        Target(
            "QuotaConfig-mapping",
            objects.valid_quota_document,
            _quota_mapping,
            (QuotaConfigError,),
            mutate_fields,
            _random_object,
        ),
        _text_target(
            "KubeSchedulerConfiguration",
            objects.valid_scheduler_config,
            _config_text,
            ConfigError,
        ),
        Target(
            "KubeSchedulerConfiguration-mapping",
            objects.valid_scheduler_config,
            _config_mapping,
            (ConfigError,),
            mutate_fields,
            _random_object,
        ),
    )


TARGETS: Final[Mapping[str, Target]] = {t.name: t for t in _targets()}
