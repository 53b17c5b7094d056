"""A small PromQL reader for the monitoring tests: which metric names an expression selects.

Not a parser: it walks the tokens and keeps each identifier that stands where a metric
selector stands. Skipped: strings, label matchers in `{}`, ranges and durations in `[]`,
Grafana variables (`$job`), numbers, function and aggregation names (an identifier followed
by `(`, or an aggregation followed by `by`/`without`), keywords, and the label lists after
by/without/on/ignoring/group_left/group_right.
"""

from __future__ import annotations

import itertools
import re

# Tokens, in order of preference: strings, bracketed parts, identifiers, numbers, the rest.
_TOKEN = re.compile(
    r"""(?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)"""
    r"|(?P<braces>\{[^}]*\})"
    r"|(?P<brackets>\[[^\]]*\])"
    r"|(?P<variable>\$\{?\w+\}?)"
    r"|(?P<number>(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:e[+-]?\d+)?)(?:[a-z]+\d*)*)"
    r"|(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"|(?P<paren>[()])"
    r"|(?P<space>\s+)"
    r"|(?P<other>.)"
)
AGGREGATIONS = frozenset(
    [
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ]
)
KEYWORDS = frozenset(["and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"])
LABEL_LISTS = frozenset(["by", "without", "on", "ignoring", "group_left", "group_right"])


def tokens(expr: str) -> list[tuple[str, str]]:
    """(kind, text) for every token that is not whitespace."""
    out = []
    for match in _TOKEN.finditer(expr):
        kind = match.lastgroup
        assert kind is not None
        if kind != "space":
            out.append((kind, match.group()))
    return out


def metric_names(expr: str) -> set[str]:
    """The metric names `expr` selects (e.g. `rate(a_total{x="y"}[5m]) / b` -> {a_total, b})."""
    toks = tokens(expr)
    names: set[str] = set()
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        following = toks[i + 1] if i + 1 < len(toks) else ("", "")
        if kind != "ident":
            i += 1
            continue
        if text in LABEL_LISTS:
            i += 1
            if toks[i : i + 1] and toks[i][1] == "(":  # skip `(label, ...)`
                while i < len(toks) and toks[i][1] != ")":
                    i += 1
                i += 1
            continue
        if text == "offset":
            i += 2  # the duration after it
            continue
        called = following[1] == "("
        grouped = text in AGGREGATIONS and following[1] in ("by", "without")
        if not (called or grouped or text in KEYWORDS):
            names.add(text)
        i += 1
    return names


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """(metric name, label names matched in its `{}`) for each selector with matchers."""
    toks = tokens(expr)
    found = []
    for (kind, text), (next_kind, next_text) in itertools.pairwise(toks):
        if kind == "ident" and next_kind == "braces":
            labels = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", next_text))
            found.append((text, labels))
    return found
