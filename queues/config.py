"""The tenant quota file (kind QuotaConfig) to a `QuotaPolicy`: strict, every error with its path.

Two passes, like kube's decode-then-validate. The first (pydantic, strict, unknown keys
rejected) checks shapes, names and quantities; the second checks rules that span fields and
tenants (guaranteed <= max, unique names, one tenant per namespace, teams within their
organisation). Each pass reports *every* problem it finds, not the first, so an operator fixes
a file in one round; the second runs only when the first found nothing, because its rules read
values the first has not vouched for. See docs/configuration.md, "Tenant quota file".

Purely computational apart from `load_quota_file`, which reads the file it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path

from pydantic import ValidationError

from batchsched.configfile.errors import ConfigError, Issue, quote, validation_issues
from batchsched.configfile.yaml_source import parse_yaml, single_document
from batchsched.model.resources import CPU
from queues.config_schema import API_VERSION, KIND, PriorityRange, QuotaDocument, TenantSpec
from queues.model import GPU, MILLI_PER_GPU, Amounts, QuotaPolicy, Tenant, describe

__all__ = [
    "API_VERSION",
    "KIND",
    "QuotaConfigError",
    "capacity_warnings",
    "load_quota_file",
    "parse_quota_config",
    "policy_from_mapping",
]


class QuotaConfigError(ConfigError):
    """A quota file that cannot be used; every issue names its YAML path."""


# Loading.


def load_quota_file(path: Path) -> QuotaPolicy:
    """The policy in a quota file; QuotaConfigError (with the file name) for any problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise QuotaConfigError([Issue("", f"cannot read the file: {err}")], str(path)) from err
    return parse_quota_config(text, str(path))


def parse_quota_config(text: str, source: str = "") -> QuotaPolicy:
    """The policy in a quota file's text; `source` names the file in error messages."""
    try:
        document = single_document(parse_yaml(text), KIND)
    except ConfigError as err:
        raise QuotaConfigError(err.issues, source) from None
    return policy_from_mapping(document, source)


def policy_from_mapping(document: Mapping[str, object], source: str = "") -> QuotaPolicy:
    try:
        spec = QuotaDocument.model_validate(document)
    except ValidationError as err:
        issues = validation_issues(err, model=QuotaDocument)
        # pydantic locates a bad mapping key at "<key>.[key]"; the key's own path is enough.
        raise QuotaConfigError(
            [Issue(i.path.replace(".[key]", ""), i.message) for i in issues], source
        ) from None
    builder = _PolicyBuilder(spec)
    policy = builder.build()
    if builder.issues:
        raise QuotaConfigError(builder.issues, source)
    return policy


class _PolicyBuilder:
    """Pass 2: cross-field rules, units, and the tree flattened into `Tenant`s."""

    def __init__(self, spec: QuotaDocument) -> None:
        self.spec = spec
        self.issues: list[Issue] = []
        self.tenants: dict[str, Tenant] = {}
        self.owner: dict[tuple[str, str], str] = {}  # (kind, value) -> path that claimed it

    def build(self) -> QuotaPolicy:
        self._check_models()
        for i, root in enumerate(self.spec.tenants):
            self._add_root(root, f"tenants[{i}]")
        default = self.spec.default_tenant
        if default is not None and default not in self.tenants:
            known = ", ".join(name for name in self.tenants if self._is_leaf(name))
            self._issue("defaultTenant", f"{quote(default)} is not a tenant; tenants: {known}")
            default = None
        elif default is not None and not self._is_leaf(default):
            self._issue("defaultTenant", f"{quote(default)} has teams; name one of its teams")
        return QuotaPolicy(
            self.tenants,
            default_tenant=default,
            queue_label=self.spec.queue_label,
            half_life_s=self.spec.fair_share.half_life,
            reservations=self.spec.backfill.reservations,
            starvation_s=self.spec.backfill.starvation_after,
            device_classes=dict(self.spec.device_classes),
        )

    def _issue(self, path: str, message: str) -> None:
        self.issues.append(Issue(path, message))

    def _is_leaf(self, name: str) -> bool:
        return not any(t.parent == name for t in self.tenants.values())

    def _check_models(self) -> None:
        seen: dict[str, str] = {}
        for alias, product in self.spec.gpu_models.items():
            if product in seen:
                self._issue(f"gpuModels.{alias}", f"the same model as alias {quote(seen[product])}")
            seen[product] = alias

    def _add_root(self, spec: TenantSpec, path: str) -> None:
        if spec.name in self.tenants:
            self._issue(f"{path}.name", f"tenant {quote(spec.name)} is defined twice")
            return
        root = self._tenant(spec, path, parent=None)
        self.tenants[root.name] = root
        children: list[Tenant] = []
        for j, team in enumerate(spec.teams):
            team_path = f"{path}.teams[{j}]"
            if team.teams:
                self._issue(
                    f"{team_path}.teams",
                    "tenants nest two levels at most: an organisation and its teams",
                )
            full = f"{spec.name}/{team.name}"
            if full in self.tenants:
                self._issue(
                    f"{team_path}.name",
                    f"team {quote(team.name)} is defined twice in {quote(spec.name)}",
                )
                continue
            child = self._tenant(team, team_path, parent=root)
            self.tenants[full] = child
            children.append(child)
        if children:
            self._check_organisation(root, spec, path, children)

    def _tenant(self, spec: TenantSpec, path: str, parent: Tenant | None) -> Tenant:
        guaranteed = self._amounts(spec.guaranteed, f"{path}.guaranteed")
        limit = self._amounts(spec.max, f"{path}.max")
        self._check_bounds(guaranteed, limit, spec, path)
        low, high = self._priority(spec, path, parent)
        name = spec.name if parent is None else f"{parent.name}/{spec.name}"
        for kind, values in (("namespace", spec.namespaces), ("queue", spec.queues)):
            for k, value in enumerate(values):
                self._claim(kind, value, f"{path}.{kind}s[{k}]")
        lend = spec.lend_idle
        if lend is None:
            lend = parent.lend_idle if parent is not None else True
        return Tenant(
            name,
            parent=parent.name if parent is not None else None,
            weight=spec.weight,
            guaranteed=guaranteed,
            max=limit,
            lend_idle=lend,
            min_priority=low,
            max_priority=high,
            namespaces=frozenset(spec.namespaces),
            queues=frozenset(spec.queues),
        )

    def _claim(self, kind: str, value: str, path: str) -> None:
        """A namespace or queue value maps to one tenant; two would make the mapping a guess."""
        first = self.owner.setdefault((kind, value), path)
        if first != path:
            self._issue(path, f"{kind} {quote(value)} is already mapped by {first}")

    def _amounts(self, raw: Mapping[str, Fraction], path: str) -> dict[str, int]:
        out: dict[str, int] = {}
        written: dict[str, str] = {}
        for key, exact in raw.items():
            name = self._resolve(key)
            unit = _unit_scale(name)
            scaled = exact * unit
            if scaled.denominator != 1:
                smallest = "1m (a thousandth)" if unit == MILLI_PER_GPU else "1 (a whole unit)"
                self._issue(
                    f"{path}.{key}",
                    f"{_show(exact)} is finer than {name} can count: "
                    f"the smallest amount is {smallest}",
                )
            if name in written:
                self._issue(f"{path}.{key}", f"the same resource as {quote(written[name])}")
            written[name] = key
            out[name] = scaled.numerator // scaled.denominator
        return out

    def _resolve(self, key: str) -> str:
        """`nvidia.com/gpu@h100` with an alias from gpuModels to the product's quota key."""
        name, at, model = key.partition("@")
        return f"{name}@{self.spec.gpu_models.get(model, model)}" if at else key

    def _check_bounds(
        self, guaranteed: Amounts, limit: Amounts, spec: TenantSpec, path: str
    ) -> None:
        keys = {self._resolve(k): k for k in (*spec.guaranteed, *spec.max)}
        for name, amount in guaranteed.items():
            if name in limit and amount > limit[name]:
                self._issue(
                    f"{path}.guaranteed.{keys[name]}",
                    f"guaranteed {describe(name, amount)} exceeds max "
                    f"{describe(name, limit[name])}",
                )
        for field, amounts in (("guaranteed", guaranteed), ("max", limit)):
            overall = amounts.get(GPU)
            for name, amount in amounts.items():
                if name.startswith(GPU + "@") and overall is not None and amount > overall:
                    self._issue(
                        f"{path}.{field}.{keys[name]}",
                        f"{describe(name, amount)} exceeds the {field} for all models, "
                        f"{describe(GPU, overall)}",
                    )

    def _priority(
        self, spec: TenantSpec, path: str, parent: Tenant | None
    ) -> tuple[int | None, int | None]:
        given = spec.priority or PriorityRange()
        inherited = (parent.min_priority, parent.max_priority) if parent else (None, None)
        low = given.min if given.min is not None else inherited[0]
        high = given.max if given.max is not None else inherited[1]
        if spec.priority is not None and low is not None and high is not None and low > high:
            self._issue(f"{path}.priority", f"min {low} is greater than max {high}")
        if parent is not None and spec.priority is not None:
            outside = (
                parent.min_priority is not None and low is not None and low < parent.min_priority
            ) or (
                parent.max_priority is not None and high is not None and high > parent.max_priority
            )
            if outside:
                self._issue(
                    f"{path}.priority",
                    f"[{low}, {high}] is outside the organisation's range "
                    f"[{parent.min_priority}, {parent.max_priority}]",
                )
        return low, high

    def _check_organisation(
        self, root: Tenant, spec: TenantSpec, path: str, children: Sequence[Tenant]
    ) -> None:
        """Pods map to leaves; an organisation's guarantee covers its teams' (and defaults to
        their sum, so the quota arithmetic never sees a parent guaranteeing less than its
        children)."""
        for field in ("namespaces", "queues"):
            if getattr(spec, field):
                self._issue(
                    f"{path}.{field}",
                    f"an organisation with teams maps no pods; "
                    f"give the {field} to one of its teams",
                )
        sums: dict[str, int] = {}
        for child in children:
            for name, amount in child.guaranteed.items():
                sums[name] = sums.get(name, 0) + amount
        guaranteed = dict(root.guaranteed)
        for name, amount in sums.items():
            mine = guaranteed.setdefault(name, amount)
            if amount > mine:
                self._issue(
                    f"{path}.teams",
                    f"the teams' guaranteed {describe(name, amount)} exceed the organisation's "
                    f"{describe(name, mine)}",
                )
            elif name in root.max and mine > root.max[name]:
                self._issue(
                    f"{path}.teams",
                    f"the teams' guaranteed {describe(name, amount)} exceed the organisation's "
                    f"max {describe(name, root.max[name])}",
                )
        self.tenants[root.name] = _with_guaranteed(root, guaranteed)


def _with_guaranteed(tenant: Tenant, guaranteed: Amounts) -> Tenant:
    return Tenant(
        tenant.name,
        parent=tenant.parent,
        weight=tenant.weight,
        guaranteed=guaranteed,
        max=tenant.max,
        lend_idle=tenant.lend_idle,
        min_priority=tenant.min_priority,
        max_priority=tenant.max_priority,
        namespaces=tenant.namespaces,
        queues=tenant.queues,
    )


def _unit_scale(name: str) -> int:
    """Queue units per unit written: millicores for cpu, milli-GPUs for GPUs, else 1."""
    return MILLI_PER_GPU if name in (CPU, GPU) or name.startswith(GPU + "@") else 1


def _show(exact: Fraction) -> str:
    return f"{float(exact):g}" if exact.denominator != 1 else str(exact.numerator)


def capacity_warnings(policy: QuotaPolicy, capacity: Amounts) -> list[str]:
    """Purely computational: one line per resource whose root tenants' guarantees add up to
    more than the cluster has (then not every guarantee can be honoured at once).

    Only roots are summed: a team's guarantee is part of its organisation's."""
    sums: dict[str, int] = {}
    for tenant in policy.children(None):
        for name, amount in tenant.guaranteed.items():
            sums[name] = sums.get(name, 0) + amount
    warnings = []
    for name, amount in sums.items():
        have = capacity.get(name, 0)
        if amount > have:
            warnings.append(
                f"guaranteed quota sums to {describe(name, amount)} but the cluster has "
                f"{describe(name, have)}: not every guarantee can be met at once"
            )
    return warnings
