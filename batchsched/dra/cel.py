"""CEL device selectors: DeviceClass and ResourceClaim `selectors[].cel.expression`.

Kubernetes 1.34's environment (k8s.io/dynamic-resource-allocation/cel/compile.go):
`device.driver`, `device.attributes[domain][id]`, `device.capacity[domain][id]` and the
`quantity` and `semver` libraries. As there, an unknown domain reads as an empty map and an
unknown id is a runtime error (`has(...)`, `"domain" in device.attributes` guard); a runtime
error or a result that is not a bool is CelEvalError, never a non-match (kube fails the claim);
undeclared names, functions and device fields do not compile, `allowMultipleAllocations` among
them (1.34 declares it only behind the alpha DRAConsumableCapacity gate). `cel.bind(v, i, e)`
runs as `[i].map(v, e)[0]`. Not supported: the strings extension (`lowerAscii`...), the list,
URL, IP and CIDR libraries, `quantity.mul/div`; quantities are exact (no rounding to 1n); type
errors kube's checker finds at compile time (`quantity("1") > quantity("0")`) surface per device.
Cost guard: kube's 10 Ki length limit (the API server refused expressions over its cost limit).

cel-python (`celpy`): its values are Python objects, so quantities and versions keep kube's
semantics and a map type answers unknown domains; common-expression-language (Rust, `cel`) has
no custom types or `cel.bind` and fails `has(device.attributes["other.com"].x)` (kube: false).
Selectors run the Python celpy's transpiler writes (its tree walker takes 490 us), on one
activation per device. `scripts/cel-compare.py`, 2-core box at load 2.4, 8 selectors x 4000
devices, best of 3: celpy compiles 8 in 0.013 s, builds activations in 0.34 s, evaluates in
0.95 s (30 us each); Rust compiles in <0.001 s, contexts 0.23 s, evaluates in 0.43 s (13 us).
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Final, TypeVar, cast

import celpy
import celpy.celtypes as celtypes
import celpy.evaluation as celeval
import lark
from celpy.celparser import CELParser

from batchsched.dra.cel_values import (
    CelError,
    CelEvalError,
    Quantity,
    Semver,
    overload_error,
    parse_quantity,
    parse_semver,
    type_name,
)
from batchsched.dra.device import AttributeValue, Device, qualified

MAX_EXPRESSION_LENGTH: Final = 10 * 1024  # resource.k8s.io CELSelectorExpressionMaxLength
ACTIVATION_CACHE_SIZE: Final = 1024  # devices whose activation is kept (5 KB each)
DEVICE_FIELDS: Final = frozenset({"driver", "attributes", "capacity"})
_MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})
_INT64: Final = 2**63
_NUMBERS: Final = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)  # a BoolType is none
_T = TypeVar("_T")


def _arg(name: str, kind: type[_T], value: object, *more: object) -> _T:
    if not isinstance(value, kind):
        raise overload_error(name, value, *more)
    return value


def _int(value: int) -> celtypes.IntType:
    if not -_INT64 <= value < _INT64:
        raise ValueError(f"{value} overflows a 64-bit integer")
    return int.__new__(celtypes.IntType, value)  # IntType(value) takes 14 us to say the same


def _compare(name: str, left: object, right: object) -> int:
    if isinstance(left, Quantity) and isinstance(right, Quantity):
        return (left.amount > right.amount) - (left.amount < right.amount)
    if isinstance(left, Semver) and isinstance(right, Semver):
        return (left.key > right.key) - (left.key < right.key)
    raise overload_error(name, left, right)


def _operand(name: str, right: object) -> Fraction:  # add and sub take a quantity or an int
    integer = isinstance(right, celtypes.IntType)
    return Fraction(cast(int, right)) if integer else _arg(name, Quantity, right).amount


def _as_integer(value: object) -> celtypes.IntType:
    amount = _arg("asInteger", Quantity, value).amount
    if amount.denominator != 1:
        raise ValueError(f"cannot convert quantity {float(amount):g} to an integer")
    return _int(amount.numerator)


def _equal(left: object, right: object) -> object:
    """kube's `==`: other types are unequal (celpy: an error), save numbers and versions."""
    if isinstance(left, celtypes.BoolType) != isinstance(right, celtypes.BoolType):
        return celtypes.BoolType(False)  # celpy: true == 1
    try:
        return celeval.bool_eq(cast(celtypes.Value, left), cast(celtypes.Value, right))
    except TypeError:
        if isinstance(left, Semver) or isinstance(right, Semver):
            raise
        pair = [Fraction(v) for v in (left, right) if isinstance(v, _NUMBERS)]
        return celtypes.BoolType(len(pair) == 2 and pair[0] == pair[1])


def _holds(check: Callable[[], object]) -> celtypes.BoolType:
    try:
        check()
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


_FALSE: Final = celtypes.BoolType(False)
# The functions a selector can call; `x.f(a)` calls f(x, a), so a method is a function too.
FUNCTIONS: Final[dict[str, Callable[..., object]]] = {
    "quantity": lambda s: Quantity(parse_quantity(str(_arg("quantity", str, s)))),
    "isQuantity": lambda s: _holds(lambda: parse_quantity(_arg("isQuantity", str, s))),
    "semver": lambda s, n=_FALSE: parse_semver(str(_arg("semver", str, s, n)), bool(n)),
    "isSemver": lambda s, n=_FALSE: _holds(lambda: parse_semver(_arg("isSemver", str, s), bool(n))),
    "compareTo": lambda a, b: _int(_compare("compareTo", a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare("isGreaterThan", a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare("isLessThan", a, b) < 0),
    "major": lambda v: _int(_arg("major", Semver, v).key[0]),
    "minor": lambda v: _int(_arg("minor", Semver, v).key[1]),
    "patch": lambda v: _int(_arg("patch", Semver, v).key[2]),
    "sign": lambda q: _int((_arg("sign", Quantity, q).amount > 0) - (q.amount < 0)),
    "asInteger": _as_integer,
    "isInteger": lambda q: _holds(lambda: _as_integer(q)),
    "asApproximateFloat": lambda q: celtypes.DoubleType(
        _arg("asApproximateFloat", Quantity, q).amount
    ),
    "add": lambda q, o: Quantity(_arg("add", Quantity, q, o).amount + _operand("add", o)),
    "sub": lambda q, o: Quantity(_arg("sub", Quantity, q, o).amount - _operand("sub", o)),
    "_==_": _equal,
    "_!=_": lambda a, b: celtypes.logical_not(cast(celtypes.Value, _equal(a, b))),
}
_PYTHON_NAMES: Final = {"_==_": "equal", "_!=_": "unequal"}  # the operators' names in `library`
_KNOWN_FUNCTIONS: Final = FUNCTIONS.keys() | celeval.base_functions.keys() | _MACROS | {"has"}


_Tree = lark.Tree[lark.Token]
_Program = Callable[[celeval.Activation], object]
_LIBRARY: Final = "library"  # what a selector's code calls FUNCTIONS by
_HAS = re.compile(r"(not isinstance\(celpy\.evaluation\.result\(.*\), CELEvalError\))$", re.M)


@functools.cache
def _parser() -> lark.Lark:
    # celpy's CELParser keeps one parser per process, built with its first caller's tree class;
    # the transpiler needs TranspilerTree nodes, so selectors have their own parser.
    return lark.Lark(
        (Path(celpy.__file__).parent / "cel.lark").read_text(), parser="lalr", start="expr",
        g_regex_flags=re.M, priority="invert", propagate_positions=True, maybe_placeholders=False,
        lexer_callbacks={"IDENT": CELParser.ambiguous_literals}, tree_class=celeval.TranspilerTree,
    )  # fmt: skip


def _identifier(node: object) -> str | None:
    """The name when `node` is a bare identifier, under any number of one-child grammar levels."""
    while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "ident":
        node = node.children[0]
    return str(node.children[0]) if isinstance(node, lark.Tree) and node.data == "ident" else None


def _expand_bind(expression: str) -> _Tree:
    """The tree of `expression` with each `cel.bind(v, init, e)` as `[init].map(v, e)[0]`."""
    text = expression
    while True:
        try:
            tree = _parser().parse(text)
        except (lark.exceptions.LarkError, RecursionError) as err:
            raise CelError(f"CEL expression {expression!r}: {str(err).splitlines()[0]}") from err
        binds = (n for n in tree.find_data("member_dot_arg") if n.children[1] == "bind")
        call = next((n for n in binds if _identifier(n.children[0]) == "cel"), None)
        if call is None:
            return tree
        arguments = cast(_Tree, call.children[2]).children if len(call.children) == 3 else []
        if len(arguments) != 3 or _identifier(arguments[0]) is None:
            raise CelError(f"CEL expression {expression!r}: cel.bind(name, init, expression)")
        name, init, body = (text[a.meta.start_pos : a.meta.end_pos] for a in arguments)  # type: ignore[union-attr]
        start, end = call.meta.start_pos, call.meta.end_pos
        text = f"{text[:start]}[{init}].map({name}, {body})[0]{text[end:]}"


def _undeclared(node: _Tree, bound: set[str | None]) -> str | None:
    """What kube's type checker rejects by name, when `node` is that."""
    match node.data, [str(c) if isinstance(c, lark.Token) else c for c in node.children]:
        case "ident", [name] if name not in bound:
            return f"undeclared reference to {name!r}"
        case ("ident_arg", [name, *_]) | ("member_dot_arg", [_, name, *_]):
            return None if name in _KNOWN_FUNCTIONS else f"undeclared function {name!r}"
        case "member_dot", [target, name] if _identifier(target) == "device":
            fields = ", ".join(sorted(DEVICE_FIELDS))
            return None if name in DEVICE_FIELDS else f"undefined field {name!r} ({fields})"
        case (("dot_ident" | "dot_ident_arg"), [name, *_]):
            return f"undeclared reference to .{name}"
    return None


def _transpile(expression: str, tree: _Tree) -> _Program:
    """The selector as a Python function of an activation, written by celpy's transpiler."""
    # The transpiler writes a call as f"{f.__module__}.{f.__qualname__}(...)".
    py = {n: _PYTHON_NAMES.get(n, n) for n in FUNCTIONS}
    names = {n: SimpleNamespace(__module__=_LIBRARY, __qualname__=py[n]) for n in FUNCTIONS}
    activation = celeval.Activation(functions=cast(dict[str, celeval.CELFunction], names))
    transpiler = celeval.Transpiler(ast=cast(celeval.TranspilerTree, tree), activation=activation)
    try:
        transpiler.transpile()
    except (celeval.CELEvalError, celeval.CELUnsupportedError, RecursionError) as err:
        raise CelError(f"CEL expression {expression!r}: {err.args[0]}") from err
    # celpy's has() gives a Python bool, which its `!`, `&&` and `||` refuse: make it a BoolType
    source = _HAS.sub(r"celpy.celtypes.BoolType(\1)", transpiler.source_text)
    code = f"def selector(base_activation):\n{textwrap.indent(source, '    ')}\n    return CEL\n"
    library = SimpleNamespace(**{py[n]: f for n, f in FUNCTIONS.items()})
    namespace = {**vars(celeval), _LIBRARY: library}
    exec(compile(code, "<cel>", "exec"), namespace)
    return cast(_Program, namespace["selector"])


@dataclass(frozen=True, slots=True)
class DeviceSelector:
    """A compiled selector; `matches(device)` evaluates it."""

    expression: str
    _program: _Program = field(repr=False, compare=False)

    def matches(self, device: Device) -> bool:
        """Whether `device` satisfies the selector; CelEvalError when evaluating fails."""
        try:
            value = self._program(_activation(device))
        except RecursionError:
            value = celeval.CELEvalError("too deeply nested")
        if isinstance(value, celtypes.BoolType):
            return bool(value)
        reason = f"must evaluate to bool, not {type_name(value)}"
        if isinstance(value, celeval.CELEvalError):
            message, cause, details = (*value.args, None, None)[:3]
            # celpy says "no such overload" where the exception it caught says more
            reason = str(details[0] if cause in (ValueError, TypeError) and details else message)
        raise CelEvalError(f"device {device.id}: CEL expression {self.expression!r}: {reason}")


@functools.lru_cache(maxsize=1024)
def compile_selector(expression: str) -> DeviceSelector:
    """The selector for `expression`, compiled once per distinct text; CelError when it does
    not compile."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        limit = f"{len(expression)} characters, over {MAX_EXPRESSION_LENGTH}"
        raise CelError(f"CEL expression {expression[:40]!r}...: {limit}")
    tree = _expand_bind(expression)
    bound = {"device"} | {  # and what macros bind: the names kube's type checker knows
        _identifier(cast(_Tree, node.children[2]).children[0])
        for node in tree.find_data("member_dot_arg")
        if node.children[1] in _MACROS and len(node.children) == 3
    }
    for problem in filter(None, (_undeclared(node, bound) for node in tree.iter_subtrees())):
        raise CelError(f"CEL expression {expression!r}: {problem}")
    return DeviceSelector(expression, _transpile(expression, tree))


# A device's activation

_ACTIVATIONS: dict[int, tuple[Device, celeval.Activation]] = {}


def _activation(device: Device) -> celeval.Activation:
    """`device`'s activation, built once for the selectors that follow; keyed by identity."""
    found = _ACTIVATIONS.get(id(device))
    if found is not None:
        return found[1]
    activation = _new_activation(device)
    _ACTIVATIONS[id(device)] = (device, activation)
    if len(_ACTIVATIONS) > ACTIVATION_CACHE_SIZE:
        del _ACTIVATIONS[next(iter(_ACTIVATIONS))]
    return activation


def _new_activation(device: Device) -> celeval.Activation:
    attributes = {n: _attribute(device, n, v) for n, v in device.attributes.items()}
    capacity = {n: Quantity(Fraction(v)) for n, v in device.capacity.items()}
    value = celtypes.MapType(
        {"driver": celtypes.StringType(device.driver), "attributes": _domains(device, attributes)}
    )
    value[celtypes.StringType("capacity")] = _domains(device, capacity)
    activation = celeval.Activation(vars={"device": value})
    # An instance attribute: the transpiled `activation.device` then skips Activation's name
    # resolution (two thirds of a simple selector's time); macros' nested activations still
    # resolve it by name.
    vars(activation)["device"] = value
    return activation


class _Domains(celtypes.MapType):
    """`device.attributes` and `device.capacity`: an unknown domain reads as an empty map."""

    def __getitem__(self, key: object) -> celtypes.Value:
        return dict.get(self, cast(celtypes.Value, key), celtypes.MapType())

    def get(self, key: object, default: object = None) -> celtypes.Value:
        return self[key]


def _domains(device: Device, values: Mapping[str, object]) -> _Domains:
    grouped: dict[str, celtypes.MapType] = {}
    for name, value in values.items():
        domain, _, ident = qualified(name, device.driver).partition("/")
        inner = grouped.setdefault(domain, celtypes.MapType())
        inner[celtypes.StringType(ident)] = cast(celtypes.Value, value)
    return _Domains({celtypes.StringType(d): ids for d, ids in grouped.items()})


def _attribute(device: Device, name: str, value: AttributeValue) -> object:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return _int(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    try:
        return parse_semver(value.text)
    except ValueError as err:  # kube fails every selector on a device with a bad version too
        raise CelEvalError(f"device {device.id}: attribute {name}: {err}") from err
