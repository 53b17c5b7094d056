"""Delegated authentication and authorization (kube's genericapiserver "delegating"
authenticator and authorizer): the API server is asked who a bearer token belongs to
(TokenReview) and whether a user may do a verb on a non-resource path (SubjectAccessReview).

Both are creates that change nothing and are asked by every replica, leader or not, so they
pass the write fence (`fenced=False`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubernetes_asyncio.client import ApiClient

from batchsched.kube.client import request_json

__all__ = ["Reviewer", "User", "access_review", "token_review"]

_TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""


ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


async def token_review(api: ApiClient, token: str) -> User | None:
    """The user the API server says `token` is, or None when it does not authenticate it."""
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }
    answer = await request_json(api, "POST", _TOKEN_REVIEWS, body=body, fenced=False)
    status = answer.get("status")
    if not isinstance(status, Mapping) or status.get("authenticated") is not True:
        return None
    user = status.get("user")
    if not isinstance(user, Mapping) or not isinstance(user.get("username"), str):
        return None
    groups = user.get("groups")
    return User(
        str(user["username"]),
        tuple(str(g) for g in groups) if isinstance(groups, Sequence) else (),
        str(user.get("uid") or ""),
    )


async def access_review(api: ApiClient, user: User, path: str, verb: str) -> tuple[bool, str]:
    """(allowed, reason) for `user` doing `verb` on the non-resource `path`."""
    spec: dict[str, object] = {
        "user": user.name,
        "groups": list(user.groups),
        "nonResourceAttributes": {"path": path, "verb": verb},
    }
    if user.uid:
        spec["uid"] = user.uid
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": spec,
    }
    answer = await request_json(api, "POST", _ACCESS_REVIEWS, body=body, fenced=False)
    status = answer.get("status")
    if not isinstance(status, Mapping):
        return False, "no status in the SubjectAccessReview answer"
    return status.get("allowed") is True, str(status.get("reason") or "")


class Reviewer:
    """Both reviews through one API client, as the secure server's middleware asks them."""

    def __init__(self, api: ApiClient) -> None:
        self._api = api

    async def authenticate(self, token: str) -> User | None:
        return await token_review(self._api, token)

    async def authorize(self, user: User, path: str, verb: str) -> tuple[bool, str]:
        return await access_review(self._api, user, path, verb)
