"""Score normalizations shared by plugins (kube-scheduler's helpers, same arithmetic)."""

from __future__ import annotations


def default_normalize_score(scores: list[int], max_priority: int, reverse: bool) -> None:
    """Scale in place to 0..max_priority by the highest score, optionally reversed (lower raw
    score is better); all zeros stay 0, or all become max_priority when reversed."""
    highest = max(scores, default=0)
    if highest == 0:
        if reverse:
            scores[:] = [max_priority] * len(scores)
        return
    for i, value in enumerate(scores):
        scaled = max_priority * value // highest
        scores[i] = max_priority - scaled if reverse else scaled


def min_max_normalize(scores: list[int], max_priority: int) -> None:
    """Rescale in place to 0..max_priority by (score - min) / (max - min); all equal gives 0."""
    if not scores:
        return
    low, high = min(scores), max(scores)
    spread = high - low
    for i, score in enumerate(scores):
        # Float arithmetic truncated toward zero, as kube-scheduler computes it.
        scores[i] = int(max_priority * ((score - low) / spread)) if spread > 0 else 0
