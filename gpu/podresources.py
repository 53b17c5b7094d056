"""Which devices each pod holds, from the kubelet's pod-resources API (v1 PodResourcesLister).

The kubelet serves it as gRPC on a unix socket (/var/lib/kubelet/pod-resources/kubelet.sock).
grpcio is not a dependency of batchsched: where it is installed (the agent's image can add it)
`open_pod_resources` returns a lister that calls `/v1.PodResourcesLister/List` with the
protobuf decoded by hand below (four small messages; no generated code); without grpcio, or
without the socket mounted, it returns the reason, and the agent publishes no per-pod GPUs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

__all__ = [
    "DEFAULT_SOCKET",
    "PodDevices",
    "PodResourcesLister",
    "PodResourcesUnavailable",
    "decode_list_response",
    "open_pod_resources",
]

DEFAULT_SOCKET: Final = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
_LIST_METHOD: Final = "/v1.PodResourcesLister/List"
_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class PodDevices:
    """The devices of one resource that one container of a pod holds."""

    namespace: str
    pod: str
    container: str
    resource: str  # e.g. nvidia.com/gpu
    device_ids: tuple[str, ...]  # for NVIDIA's device plugin: GPU UUIDs ("GPU-...", "MIG-...")


class PodResourcesUnavailable(Exception):
    """The kubelet did not answer (socket gone, kubelet restarting, call refused)."""


class PodResourcesLister(Protocol):
    def list_devices(self) -> tuple[PodDevices, ...]:
        """Every container's devices; blocking; PodResourcesUnavailable when it cannot."""
        ...


def open_pod_resources(socket: Path = DEFAULT_SOCKET) -> PodResourcesLister | str:
    """A lister for the kubelet socket, or why there is none."""
    if not socket.exists():
        return f"pod-resources socket {socket} is not mounted"
    try:
        grpc = importlib.import_module("grpc")
    except ImportError:
        return "grpcio is not installed: the pod-resources gRPC API cannot be called"
    channel = grpc.insecure_channel(f"unix://{socket}")
    call = channel.unary_unary(
        _LIST_METHOD,
        request_serializer=lambda _: b"",  # ListPodResourcesRequest has no fields
        response_deserializer=decode_list_response,
    )
    return _GrpcLister(call, grpc.RpcError)


class _GrpcLister:
    def __init__(self, call: Callable[..., tuple[PodDevices, ...]], error: type[Exception]) -> None:
        self._call = call
        self._error = error

    def list_devices(self) -> tuple[PodDevices, ...]:
        try:
            return self._call(b"", timeout=_TIMEOUT_S)
        except self._error as err:
            raise PodResourcesUnavailable(f"{_LIST_METHOD}: {err}") from err


# Protobuf wire format, the subset these messages use: varints (type 0) and length-delimited
# fields (type 2); fixed-width fields (1, 5) are skipped.


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(field number, bytes) of each length-delimited field; other wire types are skipped."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ValueError("truncated field")
            yield number, data[at : at + size]
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported wire type {wire}")


def decode_list_response(data: bytes) -> tuple[PodDevices, ...]:
    """ListPodResourcesResponse{pod_resources=1: PodResources{name=1, namespace=2,
    containers=3: ContainerResources{name=1, devices=2: ContainerDevices{resource_name=1,
    device_ids=2}}}}; ValueError on bytes that are not one."""
    found: list[PodDevices] = []
    for number, pod in _fields(data):
        if number != 1:
            continue
        name = namespace = ""
        containers: list[bytes] = []
        for field, value in _fields(pod):
            if field == 1:
                name = value.decode()
            elif field == 2:
                namespace = value.decode()
            elif field == 3:
                containers.append(value)
        for container in containers:
            found.extend(_container_devices(namespace, name, container))
    return tuple(found)


def _container_devices(namespace: str, pod: str, data: bytes) -> Iterator[PodDevices]:
    container = ""
    devices: list[bytes] = []
    for field, value in _fields(data):
        if field == 1:
            container = value.decode()
        elif field == 2:
            devices.append(value)
    for device in devices:
        resource = ""
        ids: list[str] = []
        for field, value in _fields(device):
            if field == 1:
                resource = value.decode()
            elif field == 2:
                ids.append(value.decode())
        yield PodDevices(namespace, pod, container, resource, tuple(ids))
