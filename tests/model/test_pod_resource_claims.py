"""spec.resourceClaims (Dynamic Resource Allocation), read once into the PodView."""

from __future__ import annotations

import pytest

from batchsched.model.errors import InvalidObject
from batchsched.model.pod import parse_pod
from batchsched.model.pod_spec import PodResourceClaim
from tests.builders import make_pod

CLAIMS = "spec.resourceClaims"


def test_a_pod_without_claims_has_none() -> None:
    assert make_pod("p").view().resource_claims == ()


def test_claims_keep_their_order_and_say_where_each_comes_from() -> None:
    pod = (
        make_pod("p")
        .set(
            CLAIMS,
            [
                {"name": "gpu", "resourceClaimName": "shared-gpu"},
                {"name": "scratch", "resourceClaimTemplateName": "one-gpu"},
            ],
        )
        .view()
    )
    assert pod.resource_claims == (
        PodResourceClaim("gpu", claim_name="shared-gpu"),
        PodResourceClaim("scratch", template_name="one-gpu"),
    )
    assert [c.from_template for c in pod.resource_claims] == [False, True]
    assert [c.describe() for c in pod.resource_claims] == [
        "gpu (ResourceClaim shared-gpu)",
        "scratch (ResourceClaimTemplate one-gpu)",
    ]


@pytest.mark.parametrize(
    ("value", "field", "message"),
    [
        ({"name": "gpu"}, "spec.resourceClaims", "expected a list"),
        ([{"resourceClaimName": "c"}], "spec.resourceClaims[0].name", "must not be empty"),
        ([{"name": "gpu"}], "spec.resourceClaims[0]", "exactly one of"),
        (
            [{"name": "gpu", "resourceClaimName": "c", "resourceClaimTemplateName": "t"}],
            "spec.resourceClaims[0]",
            "exactly one of",
        ),
        (
            [
                {"name": "gpu", "resourceClaimName": "a"},
                {"name": "gpu", "resourceClaimName": "b"},
            ],
            "spec.resourceClaims[1].name",
            "duplicate claim name 'gpu'",
        ),
        (["gpu"], "spec.resourceClaims[0]", "expected a mapping"),
        (
            [{"name": "gpu", "resourceClaimName": ["c"]}],
            "spec.resourceClaims[0].resourceClaimName",
            "expected a string",
        ),
    ],
    ids=[
        "claims that are not a list name the field",
        "a claim without a name names the entry's name",
        "a claim with no source names the entry",
        "a claim with both sources names the entry",
        "a name used twice names the second entry",
        "an entry that is not a mapping names the entry",
        "a claim name that is not a string names it",
    ],
)
def test_malformed_claims_are_invalid_pods_naming_the_field(
    value: object, field: str, message: str
) -> None:
    with pytest.raises(InvalidObject) as caught:
        parse_pod(make_pod("bad").set(CLAIMS, value).obj())
    err = caught.value
    assert (err.kind, err.name, err.field) == ("Pod", "default/bad", field)
    assert message in err.message
