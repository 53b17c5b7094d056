"""The secure port's decisions as pure functions, and the gate's review caching on an
injected clock (the reviews themselves are answered by a table here; the real API server
answers them in tests/integration/test_secure_serving.py)."""

from __future__ import annotations

import argparse
import logging

import pytest

from batchsched.config import default_config
from batchsched.config.configz import configz_document
from batchsched.kube.delegated import User
from batchsched.runtime.server import verbosity_level
from batchsched.runtime.serving_auth import AuthGate, always_allowed, bearer_token, verb_of
from batchsched.runtime.serving_flags import add_serving_arguments, serving_options
from batchsched.runtime.tls import peer_identity


@pytest.mark.parametrize(
    ("path", "allowed"),
    [("/healthz", True), ("/livez", True), ("/healthz/ping", False), ("/metrics", False)],
)
def test_only_the_listed_paths_are_always_allowed(path: str, allowed: bool) -> None:
    assert always_allowed(path, ("/healthz", "/readyz", "/livez")) is allowed


def test_a_trailing_star_allows_a_prefix() -> None:
    assert always_allowed("/debug/pprof/heap", ("/debug/*",))
    assert not always_allowed("/metrics", ("/debug/*",))


def test_the_verb_is_the_lower_case_method_with_head_read_as_get() -> None:
    assert [verb_of(m) for m in ("GET", "HEAD", "PUT", "POST")] == ["get", "get", "put", "post"]


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer  abc ", "abc"),
        ("Basic abc", None),
        ("Bearer ", None),
        (None, None),
    ],
)
def test_the_bearer_token_is_read_from_the_authorization_header(
    header: str | None, token: str | None
) -> None:
    assert bearer_token(header) == token


def test_a_client_certificates_cn_is_the_user_and_each_o_a_group() -> None:
    peercert = {
        "subject": (
            (("organizationName", "system:masters"),),
            (("organizationName", "ops"),),
            (("commonName", "alice"),),
        )
    }
    assert peer_identity(peercert) == ("alice", ("system:masters", "ops"))
    assert peer_identity({}) is None and peer_identity(None) is None


class Table:
    """Answers reviews from dicts and counts the calls."""

    def __init__(self) -> None:
        self.users = {"good": User("bob", ("readers",))}
        self.grants = {("bob", "/metrics", "get")}
        self.calls = 0

    async def authenticate(self, token: str) -> User | None:
        self.calls += 1
        return self.users.get(token)

    async def authorize(self, user: User, path: str, verb: str) -> tuple[bool, str]:
        self.calls += 1
        return (user.name, path, verb) in self.grants, ""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_reviews_are_cached_for_ten_seconds_then_asked_again() -> None:
    table, clock = Table(), Clock()
    gate = AuthGate(table, now=clock)
    bob = User("bob", ("readers",))
    assert await gate.allowed(bob, "/metrics", "get") == (True, "")
    assert await gate.allowed(bob, "/metrics", "get") == (True, "")
    assert table.calls == 1
    table.grants.clear()  # RBAC changed: seen once the cached answer expires
    clock.now = 10.5
    assert await gate.allowed(bob, "/metrics", "get") == (False, "")
    assert table.calls == 2


async def test_always_allowed_paths_ask_no_review_and_others_are_denied_without_a_grant() -> None:
    table = Table()
    gate = AuthGate(table, now=Clock())
    anonymous = User("system:anonymous", ("system:unauthenticated",))
    assert (await gate.allowed(anonymous, "/healthz", "get"))[0]
    assert table.calls == 0
    assert not (await gate.allowed(anonymous, "/metrics", "get"))[0]
    assert not (await gate.allowed(User("bob"), "/metrics", "put"))[0]


@pytest.mark.parametrize(
    ("v", "level"),
    [("0", logging.INFO), ("3", logging.INFO), ("4", logging.DEBUG), (" 10\n", logging.DEBUG)],
)
def test_klog_verbosity_maps_to_info_below_4_and_debug_from_4(v: str, level: int) -> None:
    assert verbosity_level(v) == level


@pytest.mark.parametrize("v", ["", "-1", "debug", "2.5"])
def test_a_verbosity_that_is_not_a_whole_number_is_refused(v: str) -> None:
    with pytest.raises(ValueError):
        verbosity_level(v)


def test_configz_is_a_kube_scheduler_configuration_with_defaults_filled_in() -> None:
    doc = configz_document(default_config())
    assert doc["kind"] == "KubeSchedulerConfiguration"
    assert doc["clientConnection"] == {
        "kubeconfig": "",
        "qps": 50.0,
        "burst": 100,
        "contentType": "application/json",
        "acceptContentTypes": "",
    }
    election = doc["leaderElection"]
    assert isinstance(election, dict) and election["leaseDuration"] == "15s"
    profiles = doc["profiles"]
    assert isinstance(profiles, list) and len(profiles) == 1
    profile = profiles[0]
    assert profile["schedulerName"] == "gpu-scheduler"
    assert {"name": "GangSort"} in profile["plugins"]["queueSort"]["enabled"]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serving_arguments(parser)
    return parser.parse_args(argv)


def test_the_flags_default_to_kube_schedulers_secure_port_and_no_plain_listener() -> None:
    options = serving_options(parse())
    assert options["secure_port"] == 10259 and "http_port" not in options
    assert options["always_allow_paths"] == ("/healthz", "/readyz", "/livez")


def test_secure_port_0_turns_it_off_and_http_address_asks_for_the_plain_listener() -> None:
    options = serving_options(parse("--secure-port", "0", "--http-address", "127.0.0.1:10251"))
    assert options["secure_port"] is None
    assert (options["http_host"], options["http_port"]) == ("127.0.0.1", 10251)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--tls-cert-file", "/etc/hosts"), "go together"),
        (("--client-ca-file", "/nonexistent/ca.crt"), "no file at /nonexistent/ca.crt"),
        (("--http-address", "localhost"), "not host:port"),
        (("--secure-port", "70000"), "not a port"),
    ],
)
def test_bad_serving_flags_are_named_in_the_error(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        serving_options(parse(*argv))
