"""`batchsched place` with Dynamic Resource Allocation objects (resource.k8s.io/v1): the devices
each placed pod's claims got in both outputs, the claim the resourceclaim controller would make
from a template, and bad DRA objects exiting 2 with the file, the object and the field.

Where pods go with which devices is in scenarios/dynamic-resource-allocation.yaml.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.cli import main
from batchsched.cluster_file import ClusterFileError, load_cluster
from batchsched.dra.nvidia import DRIVER, H100_SXM, basic_gpu, device_class, resource_slice
from batchsched.dra.objects import POD_CLAIM_NAME_ANNOTATION
from tests.builders import make_node, make_pod
from tests.dra.builders import claim as resource_claim
from tests.dra.builders import claim_template, exact

Obj = dict[str, Any]


def gpu_slice(node: str, gpus: int = 8) -> Obj:
    """NVIDIA's driver's shape: one pool named after the node; GPUs 0-3 on one PCIe root."""
    devices = [
        basic_gpu(
            i,
            f"GPU-{node}-{i:02d}",
            H100_SXM.name,
            f"pci0000:{15 if i < 4 else 97}",
            f"{H100_SXM.memory_mib}Mi",
        )
        for i in range(gpus)
    ]
    return resource_slice(node, devices, f"{node}-{DRIVER}-abcde")


def template(name: str, count: int) -> Obj:
    return claim_template(name, exact("gpus", count))


def claim(name: str, count: int) -> Obj:
    return resource_claim(name, exact("gpus", count), uid="")


def pod_with(name: str, *, claim_name: str = "", template_name: str = "") -> Obj:
    entry = {"name": "gpu"}
    entry.update(
        {"resourceClaimName": claim_name}
        if claim_name
        else {"resourceClaimTemplateName": template_name}
    )
    return (
        make_pod(name).scheduler("gpu-scheduler").set("metadata.uid", f"uid-{name}")
        .set("spec.resourceClaims", [entry]).obj()
    )  # fmt: skip


def cluster() -> list[Obj]:
    return [make_node("dgx-0").cpu("64").obj(), device_class(), gpu_slice("dgx-0")]


def write(path: Path, objects: list[Obj]) -> Path:
    path.write_text(yaml.safe_dump_all(objects))
    return path


def place(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, objects: list[Obj], output: str
) -> tuple[int, str, str]:
    path = write(tmp_path / "cluster.yaml", objects)
    rc = main(["place", "--cluster", str(path), "--output", output])
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_table_shows_each_claims_devices_under_its_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [
        *cluster(),
        template("gpu-4", 4),
        claim("shared-gpu", 1),
        pod_with("train-0", template_name="gpu-4"),
        pod_with("infer", claim_name="shared-gpu"),
        pod_with("train-1", template_name="gpu-4"),
        make_pod("web").scheduler("gpu-scheduler").cpu("1").obj(),
    ]
    rc, out, _ = place(capsys, tmp_path, objects, "table")
    assert rc == 0
    # Equal priority and age: the queue takes pods by name. The 4-GPU claim takes the PCIe
    # root the 1-GPU claim left whole.
    assert out.splitlines() == [
        "POD              NODE    REASON",
        "default/infer    dgx-0",
        "  claim default/shared-gpu: gpu.nvidia.com/dgx-0/gpu-0",
        "default/train-0  dgx-0",
        "  claim default/train-0-gpu: gpu.nvidia.com/dgx-0/gpu-4,gpu-5,gpu-6,gpu-7",
        "default/train-1  <none>  0/1 nodes are available: 1 node(s) did not have enough free "
        "devices for the pod's claims.",
        "default/web      dgx-0",
        "",
        "3/4 pending pods placed",
    ]


def test_json_lists_each_placed_pods_claims_and_devices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [*cluster(), template("gpu-2", 2), pod_with("a", template_name="gpu-2")]
    objects.append(pod_with("b", template_name="gpu-2"))
    rc, out, _ = place(capsys, tmp_path, objects, "json")
    result = json.loads(out)
    assert rc == 0 and result["placements"] == {"default/a": "dgx-0", "default/b": "dgx-0"}
    gpu = "gpu.nvidia.com/dgx-0/gpu-{}".format
    assert result["claims"] == {
        "default/a": {"default/a-gpu": [gpu(0), gpu(1)]},
        "default/b": {"default/b-gpu": [gpu(2), gpu(3)]},
    }


def test_devices_sort_by_number_and_group_by_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = gpu_slice("dgx-0", gpus=12)
    for device in big["spec"]["devices"]:  # one PCIe root for all twelve
        device["attributes"]["resource.kubernetes.io/pcieRoot"] = {"string": "pci0000:15"}
    objects = [make_node("dgx-0").obj(), device_class(), big, claim("all", 12)]
    objects.append(pod_with("p", claim_name="all"))
    rc, out, _ = place(capsys, tmp_path, objects, "table")
    names = ",".join(f"gpu-{i}" for i in range(12))
    assert rc == 0 and f"  claim default/all: gpu.nvidia.com/dgx-0/{names}" in out.splitlines()


# The claim made from a template for a pending pod


def test_a_pending_pod_gets_the_claim_the_controller_would_make_from_its_template(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "c.yaml", [template("gpu-4", 4), pod_with("p", template_name="gpu-4")])
    state = load_cluster([path], devices=True)
    [made] = state.resource_claims
    assert (made.key, made.pod_claim_name, made.owner_uid) == ("default/p-gpu", "gpu", "uid-p")
    assert made.requests[0].choices[0].count == 4 and made.allocation is None
    assert dict(state.pods[0].claim_statuses) == {"gpu": "p-gpu"}


@pytest.mark.parametrize(
    ("extra", "pod_change", "claims", "status"),
    [
        ([], {"spec.nodeName": "dgx-0"}, [], {}),
        ([], {"status.phase": "Succeeded"}, [], {}),
        (
            [],
            {"status.resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]},
            [],
            {"gpu": "p-gpu-x1"},
        ),
        ([claim("p-gpu", 1)], {}, ["default/p-gpu", "default/p-gpu-2"], {"gpu": "p-gpu-2"}),
        ("made-for-pod", {}, ["default/p-gpu-q8x2z"], {"gpu": "p-gpu-q8x2z"}),
        ("no-template", {}, [], {}),
    ],
    ids=[
        "a bound pod gets no claim made (its claims exist or it would not have been bound)",
        "a finished pod gets no claim made",
        "a pod whose status names its claim already keeps it",
        "a name taken by another claim gets a numbered suffix",
        "a claim the controller made for the pod is used when the pod's status lacks it",
        "without its template in the files the pod keeps waiting for its claim",
    ],
)
def test_which_claims_are_made_from_templates(
    tmp_path: Path,
    extra: list[Obj] | str,
    pod_change: dict[str, object],
    claims: list[str],
    status: dict[str, str],
) -> None:
    pod = make_pod("p").set("metadata.uid", "uid-p")
    pod.set("spec.resourceClaims", [{"name": "gpu", "resourceClaimTemplateName": "gpu-4"}])
    for path, value in pod_change.items():
        pod.set(path, value)
    objects = [pod.obj()]
    if extra != "no-template":
        objects.append(template("gpu-4", 4))
    if extra == "made-for-pod":
        made = claim("p-gpu-q8x2z", 4)
        made["metadata"]["annotations"] = {POD_CLAIM_NAME_ANNOTATION: "gpu"}
        made["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}
        ]
        objects.append(made)
    elif isinstance(extra, list):
        objects.extend(extra)
    state = load_cluster([write(tmp_path / "c.yaml", objects)], devices=True)
    assert sorted(c.key for c in state.resource_claims) == claims
    assert dict(state.pods[0].claim_statuses) == status


def test_a_reader_that_models_no_devices_refuses_dra_objects_as_before(tmp_path: Path) -> None:
    """A caller that models no devices reads without `devices`: its pods with claims would
    otherwise be scheduled against no devices at all."""
    path = write(tmp_path / "c.yaml", [make_node("dgx-0").obj(), gpu_slice("dgx-0")])
    with pytest.raises(ClusterFileError) as caught:
        load_cluster([path])
    message = str(caught.value)
    assert message == (
        f"{path}#1: ResourceSlice dgx-0-gpu.nvidia.com-abcde: "
        "this reader was asked to leave DRA objects out"
    )


# Bad input


def broken(obj: Obj, path: str, value: object) -> Obj:
    obj = copy.deepcopy(obj)
    target: Any = obj
    *parents, last = path.split(".")
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[last] = value
    return obj


SLICE = gpu_slice("dgx-0")


@pytest.mark.parametrize(
    ("bad", "fragments"),
    [
        (
            broken(SLICE, "spec.devices.2.attributes.type", {"string": "gpu", "int": 1}),
            [
                "c.yaml#3",
                f"ResourceSlice {SLICE['metadata']['name']}",
                "spec.devices[2].attributes.type",
                "exactly one of int, bool, string and version",
            ],
        ),
        (
            broken(SLICE, "spec.devices.0.capacity.memory.value", "lots"),
            ["ResourceSlice", "spec.devices[0].capacity.memory.value", "lots"],
        ),
        (broken(SLICE, "spec.driver", ""), ["ResourceSlice", "spec.driver", "must not be empty"]),
        (
            broken(SLICE, "spec.allNodes", True),
            ["ResourceSlice", "spec:", "exactly one of nodeName, nodeSelector, allNodes"],
        ),
        (
            broken(claim("c", 1), "spec.devices.requests.0.exactly.count", 0),
            ["ResourceClaim default/c", "spec.devices.requests[0].exactly.count", "at least 1"],
        ),
        (
            broken(template("t", 1), "spec.spec.devices.requests.0.exactly.allocationMode", "Some"),
            [
                "ResourceClaimTemplate default/t",
                "spec.spec.devices.requests[0].exactly.allocationMode",
                "unknown allocation mode 'Some'",
            ],
        ),
        (
            broken(device_class(), "spec.selectors.0.cel.expression", ""),
            ["DeviceClass gpu.nvidia.com", "spec.selectors[0].cel.expression", "not be empty"],
        ),
        (
            broken(SLICE, "apiVersion", "resource.k8s.io/v1beta1"),
            ["ResourceSlice", "apiVersion", "only resource.k8s.io/v1", "resourceslices.v1."],
        ),
        (copy.deepcopy(SLICE), ["ResourceSlice dgx-0-gpu.nvidia.com-abcde appears twice"]),
    ],
    ids=[
        "an attribute of two types names the slice, the device and the attribute",
        "a bad capacity quantity names the field and the value",
        "a slice without a driver is refused",
        "a slice reaching nodes two ways is refused",
        "a claim asking for zero devices names the claim and the request",
        "a bad template names the template and the field inside its spec",
        "a DeviceClass with an empty selector is refused",
        "an older resource.k8s.io version is refused with the command that dumps v1",
        "a slice twice is refused",
    ],
)
def test_a_bad_dra_object_exits_2_naming_file_object_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: Obj, fragments: list[str]
) -> None:
    path = write(tmp_path / "c.yaml", [*cluster(), bad])
    rc = main(["place", "--cluster", str(path)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    for fragment in fragments:
        assert fragment in err, err
