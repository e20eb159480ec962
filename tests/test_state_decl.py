"""A method's state declared once (cosim.integrators.state_decl): the record module's
layout is the generated one, the state dictionary and its schema come from the same
declaration, and blobs written before the declaration existed still restore."""
import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.errors import StateError
from cosim.integrators.state_decl import declarations

DATA = Path(__file__).resolve().parent / "data"
# blobs written by cosim 732963e (hand-written state dictionary), after 3 steps of 0.01
OLD_BLOBS = [("state_dopri5_pendulum.blob", "pendulum", "dopri5", {}),
             ("state_rk4_knife_edge.blob", "knife_edge", "rk4", {}),
             ("state_rk4_h_lti.blob", "lti", "rk4", {"h": 1e-3})]


@pytest.mark.parametrize("decl, filename", declarations(), ids=lambda x: getattr(x, "module", ""))
def test_record_module_layout_is_what_the_declaration_generates(decl, filename):
    """Regenerate with ``python cosim/integrators/state_decl.py`` after editing a declaration."""
    text = Path(filename).read_text(encoding="utf-8")
    assert decl.layout_in_module(text) == decl.layout_source()


def test_generated_constants_are_the_kernel_record_slots():
    """The slots as the kernel sees them (the record module imported) and the offsets
    of a nonholonomic model agree with the declaration."""
    from cosim.integrators import explicit_kernel, explicit_record
    from cosim.integrators.explicit_state import RECORD
    for name, value in RECORD.slots.items():
        assert getattr(explicit_record, name) == value == getattr(explicit_kernel, name, value), name
    n, m, ny = 3, 2, 6
    starts = RECORD.s_offsets({"n": n, "m": m, "ny": ny})
    assert explicit_record.offsets(n, m, ny) == tuple(o for o, _ in starts.values()) + (
        sum(length for _, length in starts.values()) + explicit_record.N_SCALARS,)
    assert explicit_record.int_length(n, m) == explicit_record.PIV + n + m


@pytest.mark.parametrize("blob_name, model, method, kw", OLD_BLOBS)
def test_blob_written_before_the_declaration_restores_byte_for_byte_and_continues(blob_name, model, method, kw):
    warnings.simplefilter("ignore")
    blob = (DATA / blob_name).read_bytes()
    sim = cosim.Simulation(model, method, **kw)
    sim.deserialize_state(blob)
    assert sim.serialize_state() == blob
    twin = cosim.Simulation(model, method, **kw)   # the run that wrote the blob
    for _ in range(3):
        twin.do_step(twin.time, 0.01)
    assert twin.serialize_state() == blob
    sim.do_step(sim.time, 0.01)
    twin.do_step(twin.time, 0.01)
    assert sim.serialize_state() == twin.serialize_state()


@pytest.mark.parametrize("model", ["pendulum", "lti"])
@pytest.mark.parametrize("method", ["dopri5", "rk4"])
def test_state_dictionary_has_the_declared_keys(model, method):
    sim = cosim.Simulation(model, method)
    sim.do_step(0.0, 0.01)
    s = sim.integrator.state()
    assert list(s) == ["method", "t", "y", "t_prev", "y_prev", "u", "stats", "method_state", "qdd", "lam"]
    assert list(s["method_state"]) == ["h_next", "f_cur", "dense", "projection_iterations"]
    assert list(s["method_state"]["dense"]) == (["Q", "h", "shift"] if method == "dopri5" else ["f0", "f1", "h"])
    ny = sim.model.n_y
    assert s["method_state"]["dense"]["h"].shape == () and s["method_state"]["f_cur"].shape == (ny,)
    assert s["t"] == sim.integrator._S[0] and s["method_state"]["h_next"] == sim.integrator.h_next


_BAD = [
    (lambda d: d.__setitem__("h_next", -1.0), "method_state.h_next: must be > 0"),
    (lambda d: d.__setitem__("h_next", 1e-300), "method_state.h_next: step size 1e-300 does not advance"),
    (lambda d: d.__setitem__("h_next", np.nan), "method_state.h_next: must be finite"),
    (lambda d: d.__setitem__("projection_iterations", -1), "method_state.projection_iterations: must be in 0.."),
    (lambda d: d.__setitem__("projection_iterations", 1.5), "method_state.projection_iterations: must be an integer"),
    (lambda d: d.__setitem__("extra", 1), "method_state: has unknown entries"),
    (lambda d: d.pop("f_cur"), "method_state: lacks ['f_cur']"),
    (lambda d: d.__setitem__("f_cur", np.zeros(7)), "method_state.f_cur: must have shape"),
    (lambda d: d["dense"].__setitem__("h", np.array(-1.0)), "method_state.dense.h: must be > 0"),
    (lambda d: d["dense"].pop("h"), "method_state.dense: lacks ['h']"),
    (lambda d: d["dense"][next(iter(d["dense"]))].__setitem__(0, np.inf), "method_state.dense."),
]


@pytest.mark.parametrize("method", ["dopri5", "rk4"])
@pytest.mark.parametrize("mutate, message", _BAD)
def test_declared_schema_refuses_a_bad_method_state_and_changes_nothing(method, mutate, message):
    sim = cosim.Simulation("knife_edge", method)   # nonholonomic: m > 0, n_g > 0
    sim.do_step(0.0, 0.01)
    before = sim.serialize_state()
    state = sim.get_state()
    mutate(state["integrator"]["method_state"])
    with pytest.raises(StateError, match=message.replace("[", r"\[").replace("]", r"\]")):
        sim.set_state(state)
    assert sim.serialize_state() == before


def test_the_writer_rewrites_a_stale_layout(tmp_path):
    from cosim.integrators import explicit_record
    from cosim.integrators.explicit_state import RECORD
    from cosim.integrators.state_decl import write_layout
    stale = tmp_path / "record.py"
    text = inspect.getsource(explicit_record)
    stale.write_text(text.replace("PIV = 16", "PIV = 17"), encoding="utf-8")
    assert write_layout(RECORD, stale) is True
    assert stale.read_text(encoding="utf-8") == text
    assert write_layout(RECORD, stale) is False
