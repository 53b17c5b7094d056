"""`batchsched place`'s output: the what-if result as a table (with estimated starts) or JSON.

Apart from cli.py so that the what-if driver is imported only by `batchsched place`, not by
every command that builds the parser (`batchsched run` among them).
"""

from __future__ import annotations

import json

from batchsched.expected_runtime import human_duration
from batchsched.whatif import WhatIfResult, devices_text


def render(result: WhatIfResult, output: str) -> str:
    """Where each pending pod went or why not, as a table or JSON; then estimated starts."""
    if output == "json":
        return json.dumps(result.to_json(), indent=2, sort_keys=True)
    rows = [("POD", "NODE", "REASON")]
    for key in result.order:
        rows.append((key, result.placements[key] or "<none>", result.reasons.get(key, "")))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    lines = []
    for r in rows:
        lines.append(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}".rstrip())
        for claim, ids in result.claims.get(r[0], {}).items():
            lines.append(f"  claim {claim}: {devices_text(ids)}")
    placed = sum(1 for v in result.placements.values() if v)
    lines.append(f"\n{placed}/{len(result.placements)} pending pods placed")
    if result.estimates:
        lines.append("\nESTIMATED START (from running pods' expected runtimes)")
        for key, seconds in result.estimates.items():
            when = "never (not even once every pod of known runtime ends)"
            if seconds is not None:
                when = f"in {human_duration(seconds)}"
            lines.append(f"{key:<{widths[0]}}  {when}")
    return "\n".join(lines)
