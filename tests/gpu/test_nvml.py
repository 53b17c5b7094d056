"""The NVML reader against the fake nvidia-ml-py: reference machines, NVML errors, lost GPUs."""

from __future__ import annotations

import pynvml
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu.fake_nvml import FAKE_MACHINES, FakeNvml, Faults, _Memory, host_numa
from gpu.machines import DGX_A100, DGX_H100, L4_BOX, PCIE_SERVER, T4_BOX, Machine, build
from gpu.nvml import GpuLost, NvmlError, NvmlReader, NvmlUnavailable, product_name
from gpu.nvml_model import GpuLinks, cpu_list, nvlink_between, parse_cpu_list
from gpu.placement import best_gpu_set
from gpu.topology import Link, LinkLevel, MigPartition


def reader_for(machine: Machine, faults: Faults | None = None) -> tuple[NvmlReader, FakeNvml]:
    lib = FakeNvml(machine, faults)
    reader = NvmlReader(lib, host_numa(machine))
    reader.open()
    return reader, lib


@pytest.mark.parametrize(
    "machine",
    [DGX_A100, DGX_H100, PCIE_SERVER, L4_BOX, T4_BOX],
    ids=lambda m: f"{m.name} reads as its reference table",
)
def test_reference_machine_reads_as_its_table(machine: Machine) -> None:
    reader, lib = reader_for(machine)
    reading = reader.read()
    expected = build(machine)
    got = reading.topology
    assert got.model == machine.product
    assert got.links == expected.links
    assert got.numa_nodes == expected.numa_nodes
    for measured, table in zip(got.gpus, expected.gpus, strict=True):
        assert (measured.index, measured.numa_node, measured.pci_bus_id) == (
            table.index,
            table.numa_node,
            table.pci_bus_id,
        )
        assert measured.memory_mib == table.memory_mib
        assert measured.uuid == lib.uuid_of(measured.index)
    assert all(h.healthy for h in reading.health)
    assert reading.driver == "550.54.15"


def test_dgx_h100_gpus_reach_each_other_through_nvswitch_at_900_gbps() -> None:
    reader, _ = reader_for(DGX_H100)
    topology = reader.read().topology
    assert topology.links[0][7] == Link(LinkLevel.NVSWITCH, 18, 900)
    assert topology.islands == (tuple(range(8)),)


def test_pcie_server_pairs_follow_the_pcie_tree() -> None:
    reader, _ = reader_for(PCIE_SERVER)
    topology = reader.read().topology
    assert [topology.level(0, j) for j in range(8)] == [
        LinkLevel.SELF,
        LinkLevel.PIX,
        LinkLevel.PXB,
        LinkLevel.PXB,
        LinkLevel.SYS,
        LinkLevel.SYS,
        LinkLevel.SYS,
        LinkLevel.SYS,
    ]


def test_without_numa_ids_or_host_info_gpus_group_by_cpu_affinity() -> None:
    failing = {"nvmlDeviceGetNumaNodeId": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND}
    lib = FakeNvml(DGX_H100, Faults(failing=failing))
    reader = NvmlReader(lib)
    reader.open()
    topology = reader.read().topology
    assert [g.numa_node for g in topology.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [cpu_list(n.cpus) for n in topology.numa_nodes] == ["0-55,112-167", "56-111,168-223"]
    lib2 = FakeNvml(DGX_H100, Faults(failing=failing))
    reader2 = NvmlReader(lib2, host_numa(DGX_H100))
    reader2.open()
    assert [g.numa_node for g in reader2.read().topology.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_numa_nodes_without_host_info_hold_the_cpus_near_their_gpus() -> None:
    lib = FakeNvml(PCIE_SERVER)
    reader = NvmlReader(lib)
    reader.open()
    nodes = reader.read().topology.numa_nodes
    assert [(n.id, cpu_list(n.cpus)) for n in nodes] == [(0, "0-31,64-95"), (1, "32-63,96-127")]


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"),
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "version mismatch"),
    ],
    ids=[
        "no driver loaded makes NVML unavailable",
        "no libnvidia-ml makes NVML unavailable",
        "no permission makes NVML unavailable",
        "library and driver of different versions make NVML unavailable",
    ],
)
def test_nvml_that_cannot_start_is_unavailable_with_the_reason(code: int, name: str) -> None:
    reader = NvmlReader(FakeNvml(PCIE_SERVER, Faults(init_error=code)))
    with pytest.raises(NvmlUnavailable) as caught:
        reader.open()
    assert caught.value.code == code
    assert "nvmlInit" in str(caught.value)
    assert name in str(caught.value)


def test_a_read_before_init_is_unavailable_not_a_crash() -> None:
    with pytest.raises(NvmlUnavailable, match="Uninitialized"):
        NvmlReader(FakeNvml(PCIE_SERVER)).read()


def test_a_read_after_close_is_unavailable() -> None:
    reader, lib = reader_for(PCIE_SERVER)
    reader.close()
    assert not lib.initialized
    with pytest.raises(NvmlUnavailable):
        reader.read()


def test_the_fake_raises_pynvmls_own_subclass_for_a_lost_gpu() -> None:
    lib = FakeNvml(DGX_H100, Faults(lost={3}))
    lib.nvmlInit()
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        lib.nvmlDeviceGetHandleByIndex(3)
    handle = lib.nvmlDeviceGetHandleByIndex(2)
    lib.lose(2)
    with pytest.raises(pynvml.NVMLError) as caught:
        lib.nvmlDeviceGetUUID(handle)
    assert caught.value.value == pynvml.NVML_ERROR_GPU_IS_LOST


def test_a_gpu_off_the_bus_is_unhealthy_and_the_rest_are_read() -> None:
    reader, _ = reader_for(PCIE_SERVER, Faults(lost={1}))
    reading = reader.read()
    topology = reading.topology
    assert topology.gpu_count == 8
    assert topology.healthy_indices() == (0, 2, 3, 4, 5, 6, 7)
    assert reading.health[1].reasons[0].startswith("lost: nvmlDeviceGetHandleByIndex: GPU is lost")
    assert topology.gpus[1].uuid == ""
    choice = best_gpu_set(topology, [1000] * 8, 4)
    assert choice is not None and choice.indices == (4, 5, 6, 7)


def test_a_gpu_lost_between_reads_turns_unhealthy_in_the_next_read() -> None:
    reader, lib = reader_for(DGX_H100)
    assert reader.read().topology.healthy_indices() == tuple(range(8))
    lib.lose(5)
    reading = reader.read()
    assert reading.topology.healthy_indices() == (0, 1, 2, 3, 4, 6, 7)
    assert not reading.health[5].healthy


def test_another_failed_call_raises_nvml_error_naming_the_call() -> None:
    failing = {"nvmlDeviceGetPciInfo": pynvml.NVML_ERROR_UNKNOWN}
    reader, _ = reader_for(PCIE_SERVER, Faults(failing=failing))
    with pytest.raises(NvmlError, match=r"nvmlDeviceGetPciInfo: Unknown Error \(NVML error 999\)"):
        reader.read()


def test_uncorrected_ecc_errors_make_a_gpu_unhealthy() -> None:
    reader, _ = reader_for(DGX_A100, Faults(ecc_uncorrected={6: 2}))
    reading = reader.read()
    assert reading.health[6].reasons == ("ecc: 2 uncorrected volatile errors",)
    assert reading.health[6].ecc_uncorrected == 2
    assert reading.topology.healthy_indices() == (0, 1, 2, 3, 4, 5, 7)


def test_a_critical_xid_marks_its_gpu_unhealthy_from_then_on() -> None:
    reader, lib = reader_for(DGX_H100)
    reader.watch()
    assert reader.wait_event(0) is None
    lib.inject_event(3, pynvml.nvmlEventTypeXidCriticalError, 79)
    event = reader.wait_event(0)
    assert event is not None and (event.uuid, event.xid) == (lib.uuid_of(3), 79)
    assert reader.read().health[3].reasons == ("xid: 79",)
    assert reader.read().topology.healthy_indices() == (0, 1, 2, 4, 5, 6, 7)


def test_an_application_xid_leaves_the_gpu_healthy() -> None:
    reader, lib = reader_for(DGX_H100)
    reader.watch()
    lib.inject_event(2, pynvml.nvmlEventTypeXidCriticalError, 13)
    event = reader.wait_event(0)
    assert event is not None and event.xid == 13
    assert reader.read().health[2].healthy


def test_a_double_bit_ecc_event_marks_its_gpu_unhealthy() -> None:
    reader, lib = reader_for(DGX_A100)
    reader.watch()
    lib.inject_event(0, pynvml.nvmlEventTypeDoubleBitEccError)
    assert reader.wait_event(0) is not None
    assert reader.read().health[0].reasons == ("ecc: double-bit error event",)


def test_mig_instances_are_read_by_profile() -> None:
    mig: dict[int, tuple[MigPartition, ...]] = {
        0: (MigPartition("1g.10gb", 7),),
        1: (MigPartition("3g.40gb", 2),),
    }
    reader, _ = reader_for(DGX_H100, Faults(mig=mig))
    gpus = reader.read().topology.gpus
    assert gpus[0].mig == (MigPartition("1g.10gb", 7),)
    assert gpus[1].mig == (MigPartition("3g.40gb", 2),)
    assert gpus[2].mig == ()


def test_gpus_without_mig_or_nvlink_read_as_without_them() -> None:
    reader, lib = reader_for(L4_BOX)
    topology = reader.read().topology
    assert all(g.mig == () for g in topology.gpus)
    assert topology.islands == ((0,), (1,), (2,), (3,))
    assert "nvmlDeviceGetNvLinkState" in lib.calls


def test_nvml_names_become_gpu_feature_discovery_product_labels() -> None:
    assert product_name("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert product_name("Tesla T4") == "Tesla-T4"


def test_direct_nvlinks_are_counted_from_either_side() -> None:
    a = GpuLinks(peers={"B": 4}, version=4)
    b = GpuLinks(peers={}, version=4)
    assert nvlink_between(a, b, "A", "B") == Link(LinkLevel.NVLINK, 4, 200)
    assert nvlink_between(b, a, "B", "A") == Link(LinkLevel.NVLINK, 4, 200)
    assert nvlink_between(b, b, "B", "B2") is None


@given(st.sets(st.integers(0, 255), max_size=40))
def test_cpu_lists_round_trip(cpus: set[int]) -> None:
    assert parse_cpu_list(cpu_list(sorted(cpus))) == tuple(sorted(cpus))


@given(st.sampled_from(sorted(FAKE_MACHINES)), st.data())
def test_any_set_of_lost_gpus_reads_without_raising(name: str, data: st.DataObject) -> None:
    machine = FAKE_MACHINES[name]
    lost = data.draw(st.sets(st.integers(0, machine.gpu_count - 1)))
    reader, _ = reader_for(machine, Faults(lost=set(lost)))
    topology = reader.read().topology
    assert topology.gpu_count == machine.gpu_count
    assert set(topology.healthy_indices()) == set(range(machine.gpu_count)) - lost


def test_gpu_lost_is_an_nvml_error() -> None:
    assert issubclass(GpuLost, NvmlError)


def test_memory_in_use_leaves_out_what_the_driver_reserves() -> None:
    # An idle H200 on driver 580 reads 615 MiB used through version 1 of the memory call and
    # 0 MiB in nvidia-smi: the reserve is no pod's load.
    reader, lib = reader_for(DGX_H100)
    lib.reserved_mib = 615
    lib.set_load(1, 40, 2048)
    load = reader.read().load
    assert load is not None
    assert [g.memory_used_mib for g in load[:2]] == [0, 2048]


class _NoVersionTwo(FakeNvml):
    """A driver older than the version-2 memory struct."""

    def nvmlDeviceGetMemoryInfo(self, handle: object, version: int | None = None) -> _Memory:
        if version is not None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        return super().nvmlDeviceGetMemoryInfo(handle)


def test_a_driver_without_the_version_two_memory_call_reads_version_one() -> None:
    lib = _NoVersionTwo(DGX_H100)
    lib.reserved_mib = 615
    lib.set_load(0, 10, 1024)
    reader = NvmlReader(lib, host_numa(DGX_H100))
    reader.open()
    load = reader.read().load
    assert load is not None and load[0].memory_used_mib == 1024 + 615
