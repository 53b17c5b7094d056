"""The API's failures as this project's exceptions: `ApiError` (the server answered no) and
`ApiUnavailable` (no answer: retry later), translated once, at the boundary (kube/client.py)."""

from __future__ import annotations

import json
from typing import Final

__all__ = ["ApiError", "ApiUnavailable", "NotLeading", "status_error"]


class ApiError(Exception):
    """The API server answered with a failure Status."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        super().__init__(f"{status} {reason}: {message}")


class ApiUnavailable(Exception):
    """No answer (connection refused or reset, timeout, broken stream): worth retrying."""


class NotLeading(ApiUnavailable):
    """A write refused before it left the process: this replica does not hold the Lease.

    Retrying is pointless until it leads again; callers treat it like an unanswered request.
    """


def status_error(status: int, body: bytes) -> ApiError:
    """The `ApiError` for a failed answer, from its Status object when it has one."""
    try:
        decoded = json.loads(body) if body else {}
    except ValueError:
        decoded = {}
    if not isinstance(decoded, dict):
        decoded = {}
    reason = str(decoded.get("reason") or _STATUS_REASONS.get(status, "Unknown"))
    message = str(decoded.get("message") or body[:200].decode("utf-8", "replace"))
    return ApiError(status, reason, message)


# The Status reason a server would give, for answers that came without a Status body.
_STATUS_REASONS: Final = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
