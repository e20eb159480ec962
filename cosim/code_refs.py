"""What a spec or scenario file may name as code: nothing but the library.

A spec/scenario file (``cosim run``, ``cosim sweep``, ``cosim fmu build``,
:func:`cosim.load_spec`) is data, perhaps from someone else.  Its ``model`` is a
library model name (``cosim models``) or a robot (``{urdf: PATH}``, ``{urdf_text:
...}``), and a ``user`` block's ``function`` is one of :data:`BLOCK_FUNCTIONS`.  Any
other ``module:attr`` or ``file.py:attr`` is refused with one line *before* anything
is imported (importing a module runs it).  User code comes only from the command
line (``cosim simulate/check path/to/file.py:Class``, ``cosim fmu build
package.module:Class`` with the package on ``PYTHONPATH``) or, in Python, as a class
or a callable.
"""
from __future__ import annotations

from collections.abc import Mapping

from .errors import SpecError

# functions of cosim.blocks made for `user` blocks of scenario files
BLOCK_FUNCTIONS = ("cosim.blocks:supervisor", "cosim.blocks:saturate")
MAX_SHOWN = 80  # characters of a refused reference in the message


def _shown(value):
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "...'"


def check_model_reference(model, source):
    """SpecError unless ``model`` (a spec's ``model`` value) names no code: a library
    model name, or a mapping (a robot, checked by the spec)."""
    if isinstance(model, Mapping):
        model = model.get("name")
    if not isinstance(model, str) or ":" not in model:
        return  # a library name (unknown ones are refused by the spec, without an import)
    from .models import MODEL_REGISTRY
    raise SpecError(
        f"{source}: model {_shown(model)}: a spec or scenario file names a library model "
        f"({', '.join(MODEL_REGISTRY)}) or a robot ({{urdf: PATH}}), never code (nothing was "
        f"imported); run your own model from the command line: cosim simulate path/to/file.py:Class")


def check_block_function(function, source, block=None):
    """SpecError unless a block's ``function`` value is one of :data:`BLOCK_FUNCTIONS`."""
    if function in BLOCK_FUNCTIONS:
        return
    where = f"block {block!r}" if isinstance(block, str) else "a block"
    raise SpecError(
        f"{source}: {where}: function {_shown(function)} is not one of {', '.join(BLOCK_FUNCTIONS)} "
        f"(a spec or scenario file names no other code; nothing was imported); a block of your "
        f"own: a Python function passed to cosim.blocks.UserBlock")


def check_data(data, source):
    """Every code reference of spec/scenario data (``model``, ``blocks[].function``)
    checked against the library, before anything reads it further."""
    if not isinstance(data, Mapping):
        return  # the spec says what is wrong
    check_model_reference(data.get("model"), source)
    blocks = data.get("blocks")
    if isinstance(blocks, (list, tuple)):
        for b in blocks:
            if isinstance(b, Mapping) and "function" in b:
                check_block_function(b.get("function"), source, b.get("name"))


__all__ = ["BLOCK_FUNCTIONS", "check_block_function", "check_data", "check_model_reference"]
