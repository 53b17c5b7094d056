"""Plugin packages: entry points in group `batchsched.plugins`, found through importlib.metadata.

Each test writes a distribution (a `.dist-info` with METADATA and entry_points.txt, and the
module it points at) into a temporary directory put on sys.path: importlib.metadata finds it
as it finds a pip-installed package, without the minutes a real `pip install` takes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchsched.config import ConfigError, config_from_mapping

EXAMPLE_SRC = Path(__file__).resolve().parents[2] / "docs/examples/batchsched-example-plugin/src"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:  # each test's modules are its own
        del sys.modules[name]


def install(
    site: Path, dist: str, entry_points: str, modules: dict[str, str] | None = None
) -> None:
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[batchsched.plugins]\n{entry_points}\n")
    for name, text in (modules or {}).items():
        (site / f"{name}.py").write_text(text)


def config(*score: str, args: dict[str, object] | None = None) -> dict[str, object]:
    profile: dict[str, object] = {
        "schedulerName": "gpu-scheduler",
        "plugins": {"score": {"enabled": [{"name": n, "weight": 3} for n in score]}},
    }
    if args is not None:
        profile["pluginConfig"] = [{"name": score[0], "args": args}]
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [profile],
    }


def example_module() -> str:
    return (EXAMPLE_SRC / "batchsched_example_plugin/__init__.py").read_text()


def install_example(site: Path, entry: str = "PreferLabel = example_plugin:SPEC") -> None:
    install(site, "example", entry, {"example_plugin": example_module()})


def error_of(document: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(document)
    return str(caught.value)


def test_an_installed_package_plugin_runs_at_the_score_point_with_its_weight_and_args(
    site: Path,
) -> None:
    install(
        site, "example", "PreferLabel = example_plugin:SPEC", {"example_plugin": example_module()}
    )
    loaded = config_from_mapping(config("PreferLabel", args={"values": ["reserved"]}))
    profile = loaded.build_profiles()["gpu-scheduler"]
    scorer = next(s for s in profile.score if s.plugin.name == "PreferLabel")
    assert scorer.weight == 3
    assert scorer.plugin.values == frozenset({"reserved"})  # type: ignore[attr-defined]


def test_a_plugin_no_package_provides_is_an_unknown_plugin_naming_the_entry_point_group(
    site: Path,
) -> None:
    message = error_of(config("NoSuchPlugin"))
    assert 'profiles[0].plugins.score.enabled[0].name: unknown plugin "NoSuchPlugin"' in message
    assert '"batchsched.plugins" entry point' in message


def test_a_package_whose_module_fails_to_import_is_named_with_its_entry_point(site: Path) -> None:
    install(site, "broken-pkg", "Broken = broken_mod:SPEC", {"broken_mod": "import not_there\n"})
    message = error_of(config("Broken"))
    assert message == (
        'profiles[0].plugins.score.enabled[0].name: package "broken-pkg" 1.0, entry point '
        '"Broken = broken_mod:SPEC" in group batchsched.plugins: cannot be imported: '
        "ModuleNotFoundError: No module named 'not_there'"
    )


def test_an_entry_point_to_a_missing_attribute_is_an_import_error(site: Path) -> None:
    install(
        site, "example", "PreferLabel = example_plugin:NOPE", {"example_plugin": example_module()}
    )
    assert "cannot be imported: AttributeError" in error_of(config("PreferLabel"))


def test_bad_args_name_the_package_the_entry_point_and_the_field(site: Path) -> None:
    install(
        site, "example", "PreferLabel = example_plugin:SPEC", {"example_plugin": example_module()}
    )
    message = error_of(config("PreferLabel", args={"values": [], "colour": "red"}))
    assert message.startswith(
        'profiles[0].pluginConfig[0].args: package "example" 1.0, entry point '
        '"PreferLabel = example_plugin:SPEC" in group batchsched.plugins: bad args: '
    )
    assert "values: " in message
    assert "colour: Extra inputs are not permitted" in message


def test_a_package_plugin_with_a_built_in_name_is_refused(site: Path) -> None:
    module = example_module().replace('"PreferLabel", PreferLabel', '"ImageLocality", PreferLabel')
    install(site, "shadow", "ImageLocality = shadow_mod:SPEC", {"shadow_mod": module})
    message = error_of(config("ImageLocality"))
    assert 'package "shadow" 1.0, entry point "ImageLocality = shadow_mod:SPEC"' in message
    assert 'has the name of a built-in plugin "ImageLocality"' in message


def test_two_packages_claiming_one_name_are_both_named(site: Path) -> None:
    modules = {"example_plugin": example_module()}
    install(site, "first", "PreferLabel = example_plugin:SPEC", modules)
    install(site, "second", "PreferLabel = example_plugin:SPEC")
    message = error_of(config("PreferLabel"))
    assert 'plugin "PreferLabel" is provided twice: package "' in message
    assert '"first" 1.0' in message and '"second" 1.0' in message


def test_an_object_that_is_not_a_plugin_spec_is_refused(site: Path) -> None:
    install(site, "odd", "Odd = odd_mod:SPEC", {"odd_mod": "SPEC = 42\n"})
    assert 'Odd = odd_mod:SPEC" in group batchsched.plugins: is int, not a' in error_of(
        config("Odd")
    )


def test_a_spec_named_unlike_its_entry_point_is_refused(site: Path) -> None:
    install_example(site, "Other = example_plugin:SPEC")
    assert 'its spec is named "PreferLabel", the entry point "Other"' in error_of(config("Other"))


def test_a_broken_package_nobody_names_does_not_stop_the_scheduler(site: Path) -> None:
    install(site, "broken-pkg", "Broken = broken_mod:SPEC", {"broken_mod": "import not_there\n"})
    assert config_from_mapping(config("ImageLocality")).build_profiles()
