"""`python3 -m gpu.probe`: what the agent's NVML reader sees, against the fake NVML (a real
GPU box runs the same code with nvidia-ml-py)."""

from __future__ import annotations

import pynvml
import pytest

from gpu.fake_nvml import FAKE_MACHINES, FakeNvml, Faults
from gpu.nvml import NvmlReader
from gpu.probe import describe, main


def probe(machine: str, faults: Faults | None = None, sizes: tuple[int, ...] = (4,)) -> str:
    reader = NvmlReader(FakeNvml(FAKE_MACHINES[machine], faults))
    reader.open()
    try:
        return describe(reader.read(), sizes)
    finally:
        reader.close()


@pytest.mark.parametrize(
    ("machine", "best"),
    [
        ("dgx-h100", "best set for 4 GPU(s): [0, 1, 2, 3] worst link NVSWITCH, 1 NUMA node(s)"),
        ("pcie-server", "best set for 4 GPU(s): [0, 1, 2, 3] worst link PXB, 1 NUMA node(s)"),
    ],
    ids=["a DGX H100 gives 4 NVSwitch GPUs on one NUMA node", "a PCIe server one socket's 4"],
)
def test_the_probe_lists_every_gpu_and_the_best_set(machine: str, best: str) -> None:
    text = probe(machine)
    assert text.count("  GPU") >= 8 and "GPU7" in text
    assert best in text


def test_a_gpu_off_the_bus_is_shown_unhealthy_and_left_out_of_the_sets() -> None:
    text = probe("dgx-h100", Faults(lost={2}), sizes=(8,))
    assert "GPU2" in text and "UNHEALTHY" in text
    assert "best set for 8 GPU(s): none (fewer healthy GPUs)" in text


def test_nvml_failing_to_start_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = FakeNvml(
        FAKE_MACHINES["dgx-h100"], Faults(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    )
    monkeypatch.setattr("gpu.probe.library", lambda fake: broken)
    assert main(["--fake", "dgx-h100"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpu.probe: NVML: ") and len(err.strip().splitlines()) == 1
