"""Reading YAML from a user: a safe, bounded parser that keeps every node's line, and the field
reader whose errors name the file, the line and the field and say what to do.

A document is read with a ``yaml.SafeLoader`` subclass (no object construction; ``10:02`` stays
a string instead of YAML 1.1's base-60 integer), refused past a size, a depth and an alias
expansion; ``_Reader`` and the value checkers turn a wrong value into an InvalidScenario.
Scenarios (scenario_loader) and the workshop's worksheets and plans are read this way.
"""
from __future__ import annotations

import difflib
import re
from typing import Any, Callable, Mapping

import yaml

from ..vocab.errors import InvalidScenario


# --------------------------------------------------------------------------- YAML with lines
class _LineLoader(yaml.SafeLoader):
    """SafeLoader that keeps line numbers and reads 10:02 as a string (not base-60 602)."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self.path: list[str | int] = []   # the keys and indices above the value being constructed


_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_DROPPED = (_INT, _FLOAT, "tag:yaml.org,2002:timestamp")  # dates stay strings too
_LineLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _DROPPED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_LineLoader.add_implicit_resolver(
    _INT, re.compile(r"^(?:[-+]?(?:0|[1-9][0-9_]*)|0x[0-9a-fA-F_]+|0o[0-7_]+)$"), list("-+0123456789"))
_LineLoader.add_implicit_resolver(
    _FLOAT, re.compile(r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?"
                       r"|\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))


class _LDict(dict):
    """A mapping that remembers its own line and the line of each value."""

    __slots__ = ("lines", "line")


class _LList(list):
    __slots__ = ("lines", "line")


class _YamlProblem(Exception):
    """Raised while constructing a node; load_text turns it into an InvalidScenario."""

    def __init__(self, message: str, line: int, field: str) -> None:
        super().__init__(message)
        self.message, self.line, self.field = message, line, field


_STR = "tag:yaml.org,2002:str"


def _value(loader, node):
    """``loader.construct_object(node, deep=True)``, with a plain string read straight from its
    node (most of a scenario's scalars: the same value, without the constructor's dispatch)."""
    if type(node) is yaml.ScalarNode and node.tag == _STR:
        return node.value
    return loader.construct_object(node, deep=True)


def _where(loader, last: str) -> str:
    """The path of a value being read, ``runs[0].intent``: the keys and indices above it (kept on the
    loader while its values are constructed), then ``last``."""
    return "".join(f"[{p}]" if type(p) is int else f".{p}" for p in (*loader.path, last)).lstrip(".")


def _construct_map(loader, node):
    loader.flatten_mapping(node)
    out = _LDict()
    out.lines = {}
    out.line = node.start_mark.line + 1
    path = loader.path
    for k_node, v_node in node.value:
        key = _value(loader, k_node)
        line = k_node.start_mark.line + 1
        if not isinstance(key, str):
            raise _YamlProblem(f"mapping keys must be strings, got {key!r}; quote the key", line,
                               _where(loader, str(key)))
        if key in out:
            raise _YamlProblem(f"duplicate key '{key}' (first given on line {out.lines[key]}); "
                               "keep only one of them", line, _where(loader, key))
        path.append(key)
        out[key] = _value(loader, v_node)
        path.pop()
        out.lines[key] = v_node.start_mark.line + 1
    return out


def _construct_seq(loader, node):
    out = _LList()
    path = loader.path
    for index, item in enumerate(node.value):
        path.append(index)
        out.append(_value(loader, item))
        path.pop()
    out.line = node.start_mark.line + 1
    out.lines = [n.start_mark.line + 1 for n in node.value]
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_map)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_seq)

if getattr(yaml, "__with_libyaml__", False):
    class _CLineLoader(yaml.CSafeLoader):
        """The same loader on libyaml's parser (ten times faster; the same nodes, lines and errors)."""

        def __init__(self, stream) -> None:
            super().__init__(stream)
            self.path: list[str | int] = []

    _CLineLoader.yaml_implicit_resolvers = _LineLoader.yaml_implicit_resolvers
    _CLineLoader.yaml_constructors = _LineLoader.yaml_constructors
    _FAST_LOADER: type = _CLineLoader
else:  # PyYAML built without libyaml
    _FAST_LOADER = _LineLoader


# --------------------------------------------------------------------------- bounds and parsing
#: Bounds on a scenario document (docs/scenarios.md): its size, its nesting, and its node count with
#: every alias counted where it is used, so an alias bomb is refused before anything expands it.
MAX_SCENARIO_BYTES = 1 << 20
MAX_YAML_DEPTH = 50
MAX_YAML_NODES = 100_000


def _check_bounds(node: yaml.Node, file: str | None) -> None:
    """Refuse a document nested deeper than MAX_YAML_DEPTH or with more than MAX_YAML_NODES values,
    every use of an alias counted: one walk that visits an aliased node at each use and stops
    at the bound (so an alias bomb costs at most MAX_YAML_NODES steps)."""
    stack = [(node, 0)]
    count = 0
    sequence, mapping = yaml.SequenceNode, yaml.MappingNode
    while stack:
        n, depth = stack.pop()
        count += 1
        if depth > MAX_YAML_DEPTH:
            raise InvalidScenario(f"nested deeper than {MAX_YAML_DEPTH} levels; a scenario is far shallower",
                                  file=file, line=n.start_mark.line + 1)
        if count > MAX_YAML_NODES:
            raise InvalidScenario(f"expands to more than {MAX_YAML_NODES} values (counting every use of an "
                                  "alias); remove the repeated aliases", file=file, line=n.start_mark.line + 1)
        kind = type(n)
        if kind is sequence:
            stack.extend((c, depth + 1) for c in n.value)
        elif kind is mapping:
            for k, v in n.value:
                stack.append((k, depth + 1))
                stack.append((v, depth + 1))


def _parse(text: str, file: str | None) -> Any:
    if len(text) > MAX_SCENARIO_BYTES:
        raise InvalidScenario(f"the file is larger than {MAX_SCENARIO_BYTES} bytes; a scenario is a few "
                              "kilobytes", file=file)
    loader = None
    try:
        loader = _FAST_LOADER(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_bounds(node, file)
        return loader.construct_document(node)
    except _YamlProblem as exc:
        raise InvalidScenario(exc.message, file=file, line=exc.line, field=exc.field) from None
    except RecursionError:
        raise InvalidScenario("nested too deeply to be a scenario", file=file) from None
    except yaml.reader.ReaderError as exc:
        char = exc.character if isinstance(exc.character, int) else 0
        raise InvalidScenario(f"the character U+{char:04X} is not allowed in YAML; remove it",
                              file=file, line=text.count("\n", 0, exc.position) + 1) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        problem, context = " ".join(str(problem).split()), context and " ".join(str(context).split())
        raise InvalidScenario(f"not valid YAML: {problem}" + (f" ({context})" if context else "")
                              + "; check indentation, colons and quoting",
                              file=file, line=mark.line + 1 if mark else None) from None
    finally:
        if loader is not None:
            loader.dispose()


def parse_yaml(text: str, *, file: str | None = None) -> Any:
    """Any YAML document crashlab reads from a user (scenarios, worksheets, plans): safe (no
    objects), bounded (size, depth, alias expansion), with line numbers kept (``_line``);
    InvalidScenario names the file and line of anything malformed."""
    return _parse(text, file)


# --------------------------------------------------------------------------- reading helpers
_REQUIRED = object()


def _line(container: Any, key: Any = None) -> int | None:
    if isinstance(container, _LDict):
        return container.lines.get(key, container.line)
    if isinstance(container, _LList):
        if isinstance(key, int) and 0 <= key < len(container.lines):
            return container.lines[key]
        return container.line
    return None


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _type_name(value: Any) -> str:
    for kind, name in ((bool, "true/false"), (dict, "a mapping"), (list, "a list"), (str, "a string"),
                       (int, "an integer"), (float, "a number"), (type(None), "nothing (null)")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


class _Reader:
    """Reads one document; ``fail`` raises InvalidScenario naming file, line and field."""

    def __init__(self, file: str | None) -> None:
        self.file = file

    def fail(self, container: Any, key: Any, path: str, message: str):
        raise InvalidScenario(message, file=self.file, line=_line(container, key), field=path or None)

    def mapping(self, parent: Any, key: Any, path: str, allowed: frozenset | set, *,
                hint: str = "", nullable: bool = False) -> dict:
        """The value ``parent[key]`` as a mapping holding only ``allowed`` fields."""
        value = parent[key]
        if value is None and nullable:
            value = _LDict()
            value.lines, value.line = {}, _line(parent, key)
        if not isinstance(value, dict):
            self.fail(parent, key, path, f"expected a mapping of fields, got {_type_name(value)} {value!r}"
                      + ("; give its fields or remove the line" if value is None else ""))
        for name in value:
            if name not in allowed:
                near = difflib.get_close_matches(str(name), sorted(allowed), n=1)
                did = f"did you mean '{near[0]}'? " if near else ""
                self.fail(value, name, _join(path, name),
                          f"unknown field; {did}expected one of: {', '.join(sorted(allowed)) or '(none)'}"
                          + (f"; {hint}" if hint else ""))
        return value

    def items(self, parent: Any, key: Any, path: str) -> list:
        """The list ``parent[key]`` (an absent key is an empty list)."""
        if key not in parent:
            return []
        value = parent[key]
        if not isinstance(value, list):
            self.fail(parent, key, path, f"expected a list, got {_type_name(value)}; write one '- ' "
                      "item per entry, or remove the line")
        return value

    def get(self, d: Mapping | list, key: Any, path: str, check: Callable[[Any], Any],
            default: Any = _REQUIRED, *, nullable: bool = False):
        """``check(d[key])``, converted; a ValueError from check becomes an InvalidScenario.
        An absent field takes ``default``; null is refused unless ``nullable``."""
        full = _join(path, key)
        present = 0 <= key < len(d) if isinstance(d, list) else key in d
        if not present:
            if default is _REQUIRED:
                self.fail(d, key, full, "required field is missing; add it")
            return default
        if d[key] is None:
            if nullable:
                return None
            self.fail(d, key, full, "the value is empty (null); give a value or remove the line")
        try:
            return check(d[key])
        except (ValueError, TypeError) as exc:
            self.fail(d, key, full, str(exc))


# value checkers: each returns the converted value or raises ValueError with what to do
def _string(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {_type_name(value)} {value!r}")
    return value


def _pattern(regex: str, what: str) -> Callable[[Any], str]:
    compiled = re.compile(regex)

    def check(value: Any) -> str:
        if not isinstance(value, str) or not compiled.match(value):
            raise ValueError(f"{value!r} is not a valid {what}")
        return value
    return check


def _integer(low: int | None = None) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"expected an integer, got {_type_name(value)} {value!r}")
        if low is not None and value < low:
            raise ValueError(f"must be at least {low}, got {value}")
        return value
    return check


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_type_name(value)} {value!r}")
    return value


def _choice(choices, what: str = "value") -> Callable[[Any], str]:
    options = sorted(choices)

    def check(value: Any) -> str:
        if value not in choices:
            near = difflib.get_close_matches(str(value), options, n=1)
            raise ValueError(f"unknown {what}: {value!r}; {'did you mean ' + repr(near[0]) + '? ' if near else ''}"
                             f"expected one of: {', '.join(options)}")
        return value
    return check


def _plain_mapping(value: Any) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping, got {_type_name(value)} {value!r}")
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _must(value, message):
    if value is None:
        raise ValueError(message)
    return value


def _string_list(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"expected a list of strings, got {value!r}")
    return list(value)


def to_yaml(doc: dict) -> str:
    """A scenario document as YAML that `crashlab run FILE` reproduces."""
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=100)
