"""clientConnection: what loads, what is refused, with the field named."""

from __future__ import annotations

import pytest

from batchsched.config import ConfigError, config_from_mapping


def connection(**fields: object) -> dict[str, object]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": fields,
    }


def test_qps_burst_and_kubeconfig_are_read() -> None:
    config = config_from_mapping(connection(qps=7.5, burst=3, kubeconfig="/etc/kc"))
    assert (config.client_connection.qps, config.client_connection.burst) == (7.5, 3)
    assert config.client_connection.kubeconfig == "/etc/kc"


def test_protobuf_the_kube_default_loads_so_a_config_kube_scheduler_wrote_is_accepted() -> None:
    config = config_from_mapping(connection(contentType="application/vnd.kubernetes.protobuf"))
    assert config.client_connection.content_type == "application/vnd.kubernetes.protobuf"


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"contentType": "application/yaml"}, "contentType"),
        ({"acceptContentTypes": "application/vnd.kubernetes.protobuf"}, "acceptContentTypes"),
        ({"burst": -1}, "burst"),
    ],
)
def test_what_batchsched_cannot_speak_is_an_error_naming_the_field(
    fields: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        config_from_mapping(connection(**fields))
