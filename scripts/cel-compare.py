#!/usr/bin/env python3
"""cel-python (batchsched.dra.cel) against common-expression-language on DRA device selectors.

Correctness: each case's outcome as Kubernetes 1.34 gives it (true, false or an error), then
what each library gives. Speed: 8 selectors x 4000 NVIDIA-like devices, compile and evaluation
per (selector, device), each library in its fastest form (celpy: the transpiled selectors of
batchsched.dra.cel with one activation per device; Rust: one cel.Context per device).

    python3 scripts/cel-compare.py            # celpy only
    pip install common-expression-language    # then both (import name `cel`)
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from fractions import Fraction

import celpy

from batchsched.dra import cel as dra_cel
from batchsched.dra.device import Device, Version

GI = 2**30
CASES = [  # (what, expression, Kubernetes' outcome on an H100)
    ("driver", 'device.driver == "gpu.nvidia.com"', True),
    ("map of maps, dot", 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100"', True),
    ("map of maps, index", 'device.attributes["gpu.nvidia.com"]["index"] == 0', True),
    ("startsWith", 'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA")', True),
    ("matches", 'device.attributes["gpu.nvidia.com"].productName.matches("H1[0-9]0")', True),
    ("in", '"gpu.nvidia.com" in device.attributes', True),
    ("has, known domain", 'has(device.attributes["gpu.nvidia.com"].uuid)', True),
    ("has, unknown domain", 'has(device.attributes["other.com"].uuid)', False),
    ("unknown id is an error", 'device.attributes["gpu.nvidia.com"].nope == 1', "error"),
    ("int compare", 'device.attributes["gpu.nvidia.com"].index < 4', True),
    ("int == string is false", 'device.attributes["gpu.nvidia.com"].index == "0"', False),
    (
        "quantity compareTo",
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("4Gi")) > 0',
        True,
    ),
    ("quantity ==", 'quantity("1Gi") == quantity("1024Mi")', True),
    (
        "semver method",
        'device.attributes["gpu.nvidia.com"].cc.isGreaterThan(semver("8.0.0"))',
        True,
    ),
    ("semver ==", 'device.attributes["gpu.nvidia.com"].cc == semver("9.0.0")', True),
    ("non-bool is an error", "device.driver", "error"),
    ("cel.bind", 'cel.bind(g, device.attributes["gpu.nvidia.com"], g.index == 0)', True),
]
SELECTORS = [
    'device.driver == "gpu.nvidia.com"',
    'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")',
    'device.attributes["gpu.nvidia.com"].index < 4',
    '"gpu.nvidia.com" in device.attributes && device.attributes["gpu.nvidia.com"].arch == "Hopper"',
    'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"',
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0',
    'device.attributes["gpu.nvidia.com"].cc.isGreaterThan(semver("8.0.0"))',
    'device.attributes["gpu.nvidia.com"].productName.matches("H100|A100")',
]


def device(i: int) -> Device:
    product = "NVIDIA H100" if i % 2 == 0 else "NVIDIA A100"
    attributes = {"productName": product, "index": i % 8, "arch": "Hopper", "uuid": f"GPU-{i}"}
    qualified = {f"gpu.nvidia.com/{k}": v for k, v in attributes.items()}
    qualified["gpu.nvidia.com/cc"] = Version("9.0.0" if i % 2 == 0 else "8.0.0")
    qualified["resource.kubernetes.io/pcieRoot"] = f"pci0000:{i % 4:02x}"
    memory = {"gpu.nvidia.com/memory": Fraction(80 * GI)}
    return Device("gpu.nvidia.com", f"node-{i // 8}", f"gpu-{i % 8}", qualified, memory)


def celpy_matches(expression: str, d: Device) -> bool:
    return dra_cel.compile_selector(expression).matches(d)


def outcome(run: Callable[[], object]) -> object:
    try:
        value = run()
    except Exception:  # any library error is Kubernetes' "error"
        return "error"
    return value if isinstance(value, bool) else "error"


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def best(run: Callable[[], object]) -> float:
    """The fastest of three runs: the box is shared, and noise only adds time."""
    return min(timed(run) for _ in range(3))


class Rust:
    """common-expression-language with quantities and versions as tagged maps (no custom types)."""

    def __init__(self) -> None:
        import cel  # type: ignore[import-not-found]

        self.cel = cel
        q, v = "kubernetes.Quantity", "kubernetes.Semver"

        def key(x: dict[str, object]) -> tuple[object, ...]:
            if q in x:
                return (Fraction(str(x[q])),)
            return tuple(dra_cel.parse_semver(str(x[v])).key)

        def compare(a: dict[str, object], b: dict[str, object]) -> int:
            return (key(a) > key(b)) - (key(a) < key(b))

        self.functions: dict[str, Callable[..., object]] = {
            "quantity": lambda s: {q: str(dra_cel.parse_quantity(s))},
            "semver": lambda s: {v: s},
            "compareTo": compare,
            "isGreaterThan": lambda a, b: compare(a, b) > 0,
        }

    def matches(self, expression: str, d: Device) -> object:
        return self.cel.compile(expression).execute(self.context(d))

    def context(self, d: Device) -> object:
        domains: dict[str, dict[str, dict[str, object]]] = {"attributes": {}, "capacity": {}}
        for field, values in (("attributes", d.attributes), ("capacity", d.capacity)):
            for name, value in values.items():
                domain, _, ident = name.partition("/")
                if isinstance(value, Version):
                    value = {"kubernetes.Semver": value.text}
                elif isinstance(value, Fraction):
                    value = {"kubernetes.Quantity": str(value)}
                domains[field].setdefault(domain, {})[ident] = value
        return self.cel.Context({"device": {"driver": d.driver, **domains}}, self.functions)


def main() -> None:
    h100 = device(0)
    try:
        rust: Rust | None = Rust()
    except ImportError:
        rust = None
    print(f"{'case':24} {'kube':6} {'celpy':6}    {'cel (Rust)'}")
    for what, expression, expected in CASES:
        mine = outcome(functools.partial(celpy_matches, expression, h100))
        theirs = outcome(functools.partial(rust.matches, expression, h100)) if rust else "-"
        marks = ["" if got == expected else " X" for got in (mine, theirs)]
        print(f"{what:24} {expected!s:6} {mine!s:6}{marks[0]:3} {theirs!s}{marks[1] * bool(rust)}")

    devices = [device(i) for i in range(4000)]
    n = len(SELECTORS) * len(devices)
    print(f"\n{len(SELECTORS)} selectors x {len(devices)} devices = {n} evaluations, best of 3")
    dra_cel._parser.cache_clear()
    grammar_s = timed(dra_cel._parser)
    compile_s = best(
        lambda: [dra_cel.compile_selector.cache_clear(), *map(dra_cel.compile_selector, SELECTORS)]
    )
    selectors = [dra_cel.compile_selector(e) for e in SELECTORS]
    build_s = best(lambda: [dra_cel._new_activation(d) for d in devices])
    eval_s = min(celpy_evaluations(selectors, devices) for _ in range(3))
    print(
        f"celpy (this module) compile 8: {compile_s:.3f} s (+ grammar once {grammar_s:.2f} s)  "
        f"activations: {build_s:.2f} s  eval: {eval_s:.2f} s ({eval_s / n * 1e6:.0f} us each)"
    )
    env = celpy.Environment()  # celpy's own interpreter, on 100 devices
    programs = [env.program(env.compile(e), functions=dra_cel.FUNCTIONS) for e in SELECTORS]
    few = [dra_cel._new_activation(d).device for d in devices[:100]]
    slow_s = timed(lambda: [p.evaluate({"device": a}) for a in few for p in programs])
    print(f"celpy interpreter   eval: {slow_s / (len(few) * len(programs)) * 1e6:.0f} us each")
    if rust is None:
        print("cel (Rust): not installed (pip install common-expression-language)")
        return
    compile_s = best(lambda: [rust.cel.compile(e) for e in SELECTORS])
    programs = [rust.cel.compile(e) for e in SELECTORS]
    build_s = best(lambda: [rust.context(d) for d in devices])
    contexts = [rust.context(d) for d in devices]
    eval_s = best(lambda: [p.execute(c) for c in contexts for p in programs])
    print(
        f"cel (Rust)          compile 8: {compile_s:.3f} s  contexts: {build_s:.2f} s  "
        f"eval: {eval_s:.2f} s ({eval_s / n * 1e6:.0f} us each)"
    )


def celpy_evaluations(selectors: list[dra_cel.DeviceSelector], devices: list[Device]) -> float:
    """Seconds evaluating, in the allocator's order (one device against all its selectors), with
    each device's activation already built (built untimed, a cache's worth at a time)."""
    total = 0.0
    for start in range(0, len(devices), dra_cel.ACTIVATION_CACHE_SIZE):
        chunk = devices[start : start + dra_cel.ACTIVATION_CACHE_SIZE]
        for d in chunk:
            dra_cel._activation(d)
        total += timed(lambda: [s.matches(d) for d in chunk for s in selectors])  # noqa: B023
    return total


if __name__ == "__main__":
    main()
