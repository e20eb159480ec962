"""Bounded YAML reading (issue 14): every file cosim reads as YAML -- scenarios,
specs, the ROS 2 node's parameter files -- goes through :func:`load_text`.

* ``yaml.SafeLoader`` only: no tags that build objects or run code;
* at most ``MAX_BYTES`` of UTF-8 text (checked before parsing);
* nesting at most ``MAX_DEPTH`` deep, checked while composing (the composer
  recurses once per level, so 5000 ``[`` would otherwise end in RecursionError);
* at most ``MAX_NODES`` values once aliases are expanded (a "billion laughs"
  alias bomb is a few hundred bytes) and no recursive alias (``&a [*a]``),
  checked by one bounded walk of the loaded data;
* an integer of more than 4300 digits (Python's conversion limit) or any other
  construction failure is a clean error.

Violations raise :class:`~cosim.errors.SpecError` with one line naming the
source and, for syntax errors, the line and column.
"""
from __future__ import annotations

import functools

from .errors import SpecError

MAX_BYTES = 1 << 20      # 1 MiB of text
MAX_DEPTH = 64           # nested mappings / sequences
MAX_NODES = 200_000      # scalars + containers after aliases are expanded


@functools.lru_cache(maxsize=1)
def _loader_class():
    """SafeLoader that refuses to compose deeper than MAX_DEPTH (made on first use:
    PyYAML is imported only where YAML is read, e.g. not inside an FMU)."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, stream, source):
            super().__init__(stream)
            self._depth, self._source = 0, source

        def compose_node(self, parent, index):
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    mark = self.peek_event().start_mark
                    raise SpecError(f"{self._source}: nested more than {MAX_DEPTH} levels deep "
                                    f"(line {mark.line + 1}); refusing to read it")
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return BoundedLoader


def _one_line(exc):
    """A YAML error as 'line L, column C: problem' (the parser's text spans lines)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + " ".join(str(problem).split())


def check_expanded(data, source):
    """Walk ``data`` once (iteratively) with aliases expanded: at most MAX_NODES
    values, at most MAX_DEPTH deep (a recursive alias is infinitely deep)."""
    count, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise SpecError(f"{source}: more than {MAX_NODES} values (YAML aliases expand to "
                            f"copies); refusing to read it")
        if depth > MAX_DEPTH:
            raise SpecError(f"{source}: nested more than {MAX_DEPTH} levels deep (or a "
                            f"recursive alias); refusing to read it")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
            stack.extend((k, depth + 1) for k in value if isinstance(k, (tuple, list, dict)))
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1) for v in value)
    return data


def load_text(text, source):
    """Plain data from YAML (or JSON) ``text``; ``source`` names it in errors."""
    if isinstance(text, bytes):
        text = decode(text, source)
    if len(text) > MAX_BYTES:
        raise SpecError(f"{source}: {len(text)} bytes, more than {MAX_BYTES}")
    import yaml
    loader = None
    try:
        loader = _loader_class()(text, source)  # checks every character first (a NUL byte...)
        data = loader.get_single_data()
    except SpecError:  # the depth limit, raised while composing
        raise
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow: binary data
        raise SpecError(f"{source} is not YAML text: {_bad_character(text, exc)}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{source} is not valid YAML: {_one_line(exc)}") from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. int of > 4300 digits
        raise SpecError(f"{source}: a value cannot be read: {' '.join(str(exc).split())[:200]}") \
            from None
    finally:
        if loader is not None:
            loader.dispose()
    return check_expanded(data, source)


def _bad_character(text, exc):
    """'character U+0000 at line L, column C is not allowed (binary data?)'."""
    pos = getattr(exc, "position", None)
    code = getattr(exc, "character", None)
    what = f"character U+{code:04X}" if isinstance(code, int) else "a character"
    if isinstance(pos, int) and 0 <= pos <= len(text):
        line = text.count("\n", 0, pos) + 1
        column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        return f"{what} at line {line}, column {column} is not allowed (binary data?)"
    return f"{what} is not allowed (binary data?)"


def decode(raw, source):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{source} is not UTF-8 text") from None


def read_path(path, source):
    """Plain data from the YAML file at ``path`` (reads at most MAX_BYTES + 1 bytes).
    OSError propagates (callers word 'cannot read' for their context)."""
    with open(path, "rb") as fh:
        raw = fh.read(MAX_BYTES + 1)
    return load_text(decode(raw, source), source)


__all__ = ["load_text", "read_path", "check_expanded", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES"]
