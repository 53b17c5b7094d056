"""The pynvml boundary: the calls the node agent makes, and pynvml's exceptions translated.

`NvmlLibrary` is the slice of the `pynvml` module we use, with pynvml's names and argument
order: the module itself fits it, and so does `gpu.fake_nvml.FakeNvml`. Every call goes through
`nvml_call`, which turns pynvml's NVMLError subclasses into ours, once:

- `NvmlUnavailable`: NVML cannot work on this node (no library, no driver, no permission,
  library/driver version skew). The agent reports not-ready and keeps retrying.
- `GpuLost`: NVML_ERROR_GPU_IS_LOST or RESET_REQUIRED: that GPU is unhealthy, the rest go on.
- `Absent`: the GPU or driver lacks the feature (NVLink on a PCIe card, MIG, ECC).
- `NvmlError`: anything else, with the call and NVML's code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, ParamSpec, Protocol, TypeVar

import pynvml

__all__ = [
    "APPLICATION_XIDS",
    "CRITICAL_EVENTS",
    "Absent",
    "GpuLost",
    "NvmlError",
    "NvmlLibrary",
    "NvmlUnavailable",
    "nvml_call",
    "optional_call",
    "translate",
]

T = TypeVar("T")
P = ParamSpec("P")


class PciInfo(Protocol):
    @property
    def busId(self) -> str: ...


class MemoryInfo(Protocol):
    @property
    def total(self) -> int: ...

    @property
    def used(self) -> int: ...


class Utilization(Protocol):
    @property
    def gpu(self) -> int: ...

    @property
    def memory(self) -> int: ...


class EventData(Protocol):
    @property
    def device(self) -> object: ...
    @property
    def eventType(self) -> int: ...
    @property
    def eventData(self) -> int: ...


class NvmlLibrary(Protocol):
    """The pynvml calls the reader makes, with pynvml's names and argument order."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...
    def nvmlDeviceGetUUID(self, handle: object) -> str: ...
    def nvmlDeviceGetName(self, handle: object) -> str: ...
    def nvmlDeviceGetMemoryInfo(self, handle: object, version: int | None = None) -> MemoryInfo: ...
    def nvmlDeviceGetUtilizationRates(self, handle: object) -> Utilization: ...
    def nvmlDeviceGetPciInfo(self, handle: object) -> PciInfo: ...
    def nvmlDeviceGetNumaNodeId(self, handle: object) -> int: ...
    def nvmlDeviceGetCpuAffinity(self, handle: object, size: int) -> Sequence[int]: ...
    def nvmlDeviceGetNvLinkState(self, handle: object, link: int) -> int: ...
    def nvmlDeviceGetNvLinkVersion(self, handle: object, link: int) -> int: ...
    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: object, link: int) -> PciInfo: ...
    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: object, link: int) -> int: ...
    def nvmlDeviceGetTopologyCommonAncestor(self, a: object, b: object) -> int: ...
    def nvmlDeviceGetMigMode(self, handle: object) -> Sequence[int]: ...
    def nvmlDeviceGetMaxMigDeviceCount(self, handle: object) -> int: ...
    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: object, index: int) -> object: ...
    def nvmlDeviceGetTotalEccErrors(
        self, handle: object, error_type: int, counter_type: int
    ) -> int: ...
    def nvmlEventSetCreate(self) -> object: ...
    def nvmlDeviceRegisterEvents(self, handle: object, types: int, events: object) -> None: ...
    def nvmlEventSetWait_v2(self, events: object, timeout_ms: int) -> EventData: ...
    def nvmlEventSetFree(self, events: object) -> None: ...


class NvmlError(Exception):
    """An NVML call failed: `call` names it, `code` is NVML's return code."""

    def __init__(self, call: str, code: int, message: str) -> None:
        self.call = call
        self.code = code
        super().__init__(f"{call}: {message} (NVML error {code})")


class NvmlUnavailable(NvmlError):
    """NVML cannot work on this node: no library, no driver, no permission, version skew."""


class GpuLost(NvmlError):
    """The GPU fell off the bus or needs a reset: unhealthy until the node is repaired."""


class Absent(NvmlError):
    """The GPU or driver lacks the feature (NVLink on a PCIe card, MIG, ECC)."""


_UNAVAILABLE: Final = frozenset(
    {
        pynvml.NVML_ERROR_UNINITIALIZED,
        pynvml.NVML_ERROR_NO_PERMISSION,
        pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
        pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
        pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    }
)
_LOST: Final = frozenset({pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_RESET_REQUIRED})
_ABSENT: Final = frozenset(
    {
        pynvml.NVML_ERROR_NOT_SUPPORTED,
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
        pynvml.NVML_ERROR_NOT_FOUND,
        pynvml.NVML_ERROR_INVALID_ARGUMENT,  # a link index past the GPU's last link
    }
)
# XIDs the k8s device plugin treats as the application's fault, not the GPU's.
APPLICATION_XIDS: Final = frozenset({13, 31, 43, 45, 68, 109})
CRITICAL_EVENTS: Final = (
    pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeDoubleBitEccError
)


def translate(call: str, err: Exception) -> NvmlError:
    """Our exception for a pynvml one (anything else NVML raised is a failed call too)."""
    code = getattr(err, "value", pynvml.NVML_ERROR_UNKNOWN)
    code = code if isinstance(code, int) else pynvml.NVML_ERROR_UNKNOWN
    message = str(err) or type(err).__name__
    kind: type[NvmlError] = NvmlError
    if code in _UNAVAILABLE:
        kind = NvmlUnavailable
    elif code in _LOST:
        kind = GpuLost
    elif code in _ABSENT:
        kind = Absent
    return kind(call, code, message)


def nvml_call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Call one NVML function; pynvml's exception becomes ours, named after the call."""
    try:
        return fn(*args, **kwargs)
    except pynvml.NVMLError as err:
        raise translate(_name(fn), err) from err
    except OSError as err:  # the shared library failed to load some other way
        code = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
        raise NvmlUnavailable(_name(fn), code, str(err)) from err


def optional_call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
    """`nvml_call`, with None for a feature this GPU or driver does not have."""
    try:
        return nvml_call(fn, *args, **kwargs)
    except Absent:
        return None


def _name(fn: Callable[..., object]) -> str:
    return getattr(fn, "__name__", "nvml")
