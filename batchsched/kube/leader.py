"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's leaderelection semantics.

Every replica runs `LeaderElector.run(on_started_leading)`:

1. Acquire: try every retryPeriod (jittered, as client-go does) until the Lease is absent
   (create it), already ours, has an empty holder, or has expired. Expiry is judged by OUR
   monotonic clock: a record counts as expired leaseDurationSeconds after we last saw it
   change, never by comparing its renewTime with our wall clock (clocks on two machines
   disagree; the time between two of our own observations does not).
2. Lead: `on_started_leading()` runs as a task while the lease is renewed every retryPeriod.
   Writes carry the resourceVersion we last saw, so of two racing candidates exactly one
   wins (the other gets 409 Conflict).
3. Lose: when no renewal has succeeded for renewDeadline, or we see another identity in the
   lease, the leading task is cancelled and `run` raises `LeadershipLost`. kube-scheduler
   exits at that point and lets its Deployment restart it as a standby; the caller should too.

Cancelling `run` stops renewing WITHOUT giving the lease up (as a SIGKILL would: a standby
takes over once the lease expires). On a graceful stop call `release()` after `run` has
ended: it writes an empty holder with leaseDurationSeconds 1 so a standby takes over at once.

With a client factory (`renew_client`), renewals run on a thread of their own
(kube/lease_renewal.py).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import NoReturn, Protocol

from kubernetes_asyncio.client import ApiClient

from batchsched.clock import Clock, SystemClock
from batchsched.kube.client import micro_time
from batchsched.kube.lease import LeaseApi, LeaseApiError, LeaseRecord
from batchsched.kube.lease_renewal import renew_on_thread
from batchsched.metrics import SchedulerMetrics

logger = logging.getLogger(__name__)

#: client-go's wait.Jitter factor for acquire retries; renewDeadline must exceed it * retryPeriod.
JITTER_FACTOR = 1.2


def default_identity() -> str:
    """`<hostname>_<uuid>`, as kube-scheduler names itself in the lease."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElectionSettings(Protocol):
    """The leaderElection block of the scheduler configuration, as far as we read it."""

    @property
    def resource_namespace(self) -> str: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def lease_duration(self) -> float: ...
    @property
    def renew_deadline(self) -> float: ...
    @property
    def retry_period(self) -> float: ...


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Durations in seconds; the defaults are kube-scheduler's."""

    namespace: str = "kube-system"
    name: str = "gpu-scheduler"
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        # The same checks client-go's NewLeaderElector makes: without them a leader could
        # still believe it leads after a standby has been allowed to take over.
        if min(self.lease_duration, self.renew_deadline, self.retry_period) <= 0:
            raise ValueError("leaseDuration, renewDeadline and retryPeriod must be positive")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if not self.identity or not self.name or not self.namespace:
            raise ValueError("identity, lease name and namespace must not be empty")

    @classmethod
    def from_settings(
        cls, settings: LeaderElectionSettings, identity: str | None = None
    ) -> LeaderElectionConfig:
        return cls(
            namespace=settings.resource_namespace,
            name=settings.resource_name,
            identity=identity or default_identity(),
            lease_duration=settings.lease_duration,
            renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period,
        )

    @property
    def lease_duration_seconds(self) -> int:
        # The API field is whole seconds; rounding up never shortens what we promise.
        return max(1, math.ceil(self.lease_duration))


class LeadershipLost(Exception):
    """`run` ends with this when the lease could not be renewed or another identity holds it."""


def may_acquire(record: LeaseRecord, identity: str, observed_at: float, now: float) -> bool:
    """Purely computational: may `identity` write itself into this lease at monotonic `now`?

    `observed_at` is when we last saw the record change, on our own clock.
    """
    if not record.holder or record.holder == identity:
        return True
    return observed_at + record.lease_duration_seconds <= now


def claimed_record(
    current: LeaseRecord | None, identity: str, wall: float, lease_duration_seconds: int
) -> LeaseRecord:
    """Purely computational: the record that claims (or renews) the lease for `identity`."""
    stamp = micro_time(wall)
    if current is not None and current.holder == identity:
        acquire_time, transitions = current.acquire_time or stamp, current.transitions
    else:
        acquire_time = stamp
        transitions = 0 if current is None else current.transitions + 1
    return LeaseRecord(identity, lease_duration_seconds, acquire_time, stamp, transitions)


class LeaderElector:
    """One candidate for one Lease. See the module docstring for the protocol."""

    def __init__(
        self,
        api: ApiClient,
        config: LeaderElectionConfig | None = None,
        *,
        clock: Clock | None = None,
        metrics: SchedulerMetrics | None = None,
        rng: random.Random | None = None,
        renew_client: Callable[[], ApiClient] | None = None,
    ) -> None:
        self.config = config if config is not None else LeaderElectionConfig()
        # With a client factory, renewals run on a thread of their own with their own event
        # loop and client, as client-go renews in a goroutine of its own: a scheduling cycle
        # that holds the main loop for seconds (a 1000-member gang) cannot make us miss the
        # renew deadline. Without one (unit tests on virtual time), on the caller's loop.
        self._renew_client = renew_client
        # kube-scheduler bounds each leader-election request by renewDeadline, too.
        self._leases = LeaseApi(
            api, self.config.namespace, self.config.name, self.config.renew_deadline
        )
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._metrics = metrics
        self._rng = rng if rng is not None else random.Random()
        self._observed: LeaseRecord | None = None  # the record as we last saw or wrote it
        self._observed_at = 0.0  # our monotonic time when that record last changed
        self._last_renew = 0.0  # start of our last successful acquire/renew write
        self._leading = False
        self._running = False
        if metrics is not None:
            metrics.set_leader(self.config.name, False)

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def is_leader(self) -> bool:
        """True between a successful acquire and the end of `run` (loss, return or cancel)."""
        return self._leading

    def write_window(self) -> float:
        """Seconds this replica may still write: until renewDeadline after its last
        successful renewal (a standby may take over leaseDuration after it); 0 when it
        does not lead."""
        if not self._leading:
            return 0.0
        return self._last_renew + self.config.renew_deadline - self._clock.now()

    def holds_lease(self) -> bool:
        """Whether this replica may write now (`write_window` has time left): stricter than
        `is_leader`, which turns false only once the renew loop has noticed a loss."""
        return self.write_window() > 0

    @property
    def leader(self) -> str:
        """The holder identity we last observed ("" when none or not yet known)."""
        return self._observed.holder if self._observed is not None else ""

    async def run(self, on_started_leading: Callable[[], Awaitable[None]]) -> None:
        """Wait to acquire the lease, then run `on_started_leading` while renewing it.

        Returns when `on_started_leading` returns (the lease is kept until `release()` or
        expiry); re-raises what it raises; raises `LeadershipLost` when leadership is lost
        (after cancelling and awaiting the leading task). Cancelling `run` stops renewing and
        keeps the lease record as is. One `run` at a time per elector.
        """
        if self._running:
            raise RuntimeError("LeaderElector.run is already running")
        self._running = True
        try:
            await self._acquire()
            await self._lead(on_started_leading)
        finally:
            self._running = False
            self._set_leading(False)

    async def release(self) -> None:
        """Give the lease up at once if we hold it: empty holder, leaseDurationSeconds 1.

        Call after `run` has ended (returned, raised or been cancelled); a lease that has
        meanwhile passed to someone else is left alone.
        """
        if self._running:
            raise RuntimeError("release() must be called after LeaderElector.run has ended")
        if self._observed is None or self._observed.holder != self.identity:
            return
        wall = self._clock.wall()
        stamp = micro_time(wall)
        record = LeaseRecord("", 1, stamp, stamp, self._observed.transitions)
        try:
            written = await self._leases.replace(record)
            if written is None:
                # A renewal that was in flight when run() was cancelled may have moved the
                # resourceVersion on; re-read and release only if the lease still names us.
                current = await self._leases.get()
                if current is None or current.holder != self.identity:
                    logger.info("lease no longer ours, nothing to release lease=%s", self._key)
                    return
                written = await self._leases.replace(record)
        except LeaseApiError as err:
            logger.warning("releasing the lease failed lease=%s error=%s", self._key, err)
            return
        if written is not None:
            self._observe(written, self._clock.now())
            logger.info("released leader lease lease=%s identity=%s", self._key, self.identity)

    def healthz(self, max_tolerable_expired: float = 20.0) -> tuple[bool, str]:
        """A /healthz check (client-go's HealthzAdaptor; kube-scheduler tolerates 20 s): a
        leader whose renewals have been stuck past leaseDuration + that is unhealthy."""
        if not self._leading:
            return True, "not leading"
        stale = self._clock.now() - self._last_renew
        if stale > self.config.lease_duration + max_tolerable_expired:
            return False, f"failed election to renew leadership on lease {self._key}"
        return True, "ok"

    @property
    def _key(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"

    async def _acquire(self) -> None:
        logger.info(
            "attempting to acquire leader lease lease=%s identity=%s", self._key, self.identity
        )
        while True:
            started = self._clock.now()
            if await self._try_acquire_or_renew():
                self._last_renew = started
                self._set_leading(True)
                logger.info("acquired leader lease lease=%s identity=%s", self._key, self.identity)
                return
            retry = self.config.retry_period
            await asyncio.sleep(retry + self._rng.random() * JITTER_FACTOR * retry)

    async def _lead(self, on_started_leading: Callable[[], Awaitable[None]]) -> None:
        leading = asyncio.ensure_future(on_started_leading())
        keep = self._keep_renewing() if self._renew_client is None else self._renew_on_thread()
        renewing = asyncio.create_task(keep, name=f"lease-renew {self._key}")
        try:
            await asyncio.wait({leading, renewing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            leading.cancel()
            renewing.cancel()
            await asyncio.gather(leading, renewing, return_exceptions=True)
        if renewing.done() and not renewing.cancelled():
            lost = renewing.exception()
            if lost is not None:
                raise lost
        leading.result()

    async def _renew_on_thread(self) -> None:
        """`_keep_renewing` on a thread with its own loop and client (kube/lease_renewal.py);
        raises what it raises (LeadershipLost). Cancelling stops the thread and waits for it."""
        factory = self._renew_client
        assert factory is not None
        name = f"lease-renew {self._key}"
        await renew_on_thread(self._keep_renewing, self._leases, factory, name)

    async def _keep_renewing(self) -> NoReturn:
        while True:
            await asyncio.sleep(self.config.retry_period)
            await self._renew_before_deadline()

    async def _renew_before_deadline(self) -> None:
        """Retry renewal until it succeeds; raise LeadershipLost past renewDeadline."""
        while True:
            started = self._clock.now()
            left = self._last_renew + self.config.renew_deadline - started
            if left <= 0:
                raise LeadershipLost(
                    f"failed to renew lease {self._key} within {self.config.renew_deadline}s"
                )
            try:
                async with asyncio.timeout(left):
                    renewed = await self._try_acquire_or_renew()
            except TimeoutError:
                renewed = False
            if renewed:
                self._last_renew = started
                return
            holder = self.leader
            if holder and holder != self.identity:
                # client-go keeps retrying until the deadline; we know already that another
                # replica leads, and scheduling on would be a split brain.
                raise LeadershipLost(f"lease {self._key} is now held by {holder}")
            left = self._last_renew + self.config.renew_deadline - self._clock.now()
            await asyncio.sleep(max(0.0, min(self.config.retry_period, left)))

    async def _try_acquire_or_renew(self) -> bool:
        try:
            if self._leading and await self._renew_fast():
                return True
            return await self._acquire_or_renew_slow()
        except LeaseApiError as err:
            logger.warning("lease request failed lease=%s error=%s", self._key, err)
            return False

    async def _renew_fast(self) -> bool:
        """A leader renews with the record it wrote last: one request, no read first."""
        now = self._clock.now()
        ours = self._observed
        if ours is None or ours.holder != self.identity:
            return False
        if self._observed_at + ours.lease_duration_seconds <= now:
            return False  # our own record looks expired: read before writing
        record = claimed_record(
            ours, self.identity, self._clock.wall(), self.config.lease_duration_seconds
        )
        try:
            written = await self._leases.replace(record)
        except LeaseApiError as err:
            logger.info("fast lease renewal failed, re-reading lease=%s error=%s", self._key, err)
            return False
        if written is None:
            return False
        self._observe(written, now)
        return True

    async def _acquire_or_renew_slow(self) -> bool:
        current = await self._leases.get()
        now = self._clock.now()
        lease_seconds = self.config.lease_duration_seconds
        if current is None:
            record = claimed_record(None, self.identity, self._clock.wall(), lease_seconds)
            written = await self._leases.create(record)
        else:
            self._observe(current, now)
            if not may_acquire(current, self.identity, self._observed_at, now):
                return False
            record = claimed_record(current, self.identity, self._clock.wall(), lease_seconds)
            written = await self._leases.replace(record)
        if written is None:
            return False  # another candidate created or updated the lease first
        self._observe(written, now)
        return True

    def _observe(self, record: LeaseRecord, now: float) -> None:
        if record == self._observed:
            return
        if record.holder and record.holder != self.leader and record.holder != self.identity:
            logger.info("new leader elected lease=%s leader=%s", self._key, record.holder)
        self._observed = record
        self._observed_at = now

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        if self._metrics is not None:
            self._metrics.set_leader(self.config.name, leading)
