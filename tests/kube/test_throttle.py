"""The client's token bucket and Retry-After decisions, on an injected clock (no sleeps)."""

from __future__ import annotations

import pytest

from batchsched.kube.throttle import (
    RetryPolicy,
    TokenBucket,
    bucket_for,
    parse_retry_after,
    retry_delay,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def waits_for(bucket: TokenBucket, count: int) -> list[float]:
    return [bucket.reserve() for _ in range(count)]


def test_a_full_bucket_lets_burst_requests_go_at_once_and_spaces_the_rest_by_one_over_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10.0, burst=3, now=clock)
    assert waits_for(bucket, 5) == pytest.approx([0.0, 0.0, 0.0, 0.1, 0.2])


def test_n_requests_at_qps_q_and_burst_b_span_at_least_n_minus_b_over_q() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=5.0, burst=4, now=clock)
    sent_at = []
    for _ in range(24):
        clock.now += bucket.reserve()  # the caller waits what it is told, then sends
        sent_at.append(clock.now)
    assert sent_at[-1] - sent_at[0] == pytest.approx((24 - 4) / 5.0)


def test_idle_time_refills_the_bucket_up_to_burst_and_no_further() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2.0, burst=2, now=clock)
    waits_for(bucket, 2)
    clock.now += 60.0  # a minute idle earns 120 tokens, but the bucket holds 2
    assert waits_for(bucket, 3) == pytest.approx([0.0, 0.0, 0.5])


def test_a_partly_refilled_bucket_waits_only_for_the_missing_fraction() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=4.0, burst=1, now=clock)
    bucket.reserve()
    clock.now += 0.1
    assert bucket.reserve() == pytest.approx(0.15)


def test_zero_in_the_config_means_kube_schedulers_defaults_and_a_negative_qps_no_limit() -> None:
    clock = FakeClock()
    default = bucket_for(0.0, 0, clock)
    assert default is not None and (default.qps, default.burst) == (50.0, 100)
    assert bucket_for(-1.0, 10, clock) is None
    explicit = bucket_for(7.5, 3, clock)
    assert explicit is not None and (explicit.qps, explicit.burst) == (7.5, 3)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("3", 3.0),
        (" 0 ", 0.0),
        ("Thu, 01 Jan 1970 00:16:50 GMT", 10.0),  # 1010 s after the epoch; now is 1000
        ("Thu, 01 Jan 1970 00:00:01 GMT", 0.0),  # already past
        (None, None),
        ("soon", None),
        ("-1", None),
        ("1.5", None),
    ],
)
def test_retry_after_is_read_as_delta_seconds_or_an_http_date(
    header: str | None, seconds: float | None
) -> None:
    assert parse_retry_after(header, now_epoch=1000.0) == seconds


POLICY = RetryPolicy(max_retries=2, max_wait=5.0)


def delay(method: str, status: int, retry_after: str | None, attempt: int = 0) -> float | None:
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    return retry_delay(POLICY, method, status, headers, attempt, time_left=30.0, now_epoch=0.0)


def test_a_429_with_retry_after_is_retried_for_any_method_after_the_asked_wait() -> None:
    assert delay("POST", 429, "2") == 2.0
    assert delay("GET", 429, "1") == 1.0


def test_a_5xx_with_retry_after_is_retried_only_for_idempotent_methods() -> None:
    assert delay("GET", 503, "1") == 1.0
    assert delay("PUT", 500, "1") == 1.0
    assert delay("POST", 503, "1") is None  # a Binding may have taken effect
    assert delay("PATCH", 504, "1") is None


def test_answers_without_retry_after_or_other_codes_go_back_to_the_caller() -> None:
    assert delay("GET", 429, None) is None
    assert delay("GET", 409, "1") is None
    assert delay("GET", 404, "1") is None


def test_a_long_retry_after_is_cut_to_the_bound_and_retries_stop_after_the_limit() -> None:
    assert delay("GET", 429, "3600") == 5.0
    assert delay("GET", 429, "1", attempt=1) == 1.0
    assert delay("GET", 429, "1", attempt=2) is None


def test_a_wait_that_would_outlast_the_requests_deadline_is_not_made() -> None:
    headers = {"Retry-After": "4"}
    assert retry_delay(POLICY, "GET", 429, headers, 0, time_left=3.0, now_epoch=0.0) is None
    assert retry_delay(POLICY, "GET", 429, headers, 0, time_left=4.5, now_epoch=0.0) == 4.0
