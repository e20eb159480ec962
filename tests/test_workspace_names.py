"""The named work arrays of the explicit (dopri5/rk4), rkc-penalty, local-index1,
generalized-α and BDF records follow their workspace's tuple order: every index of
the tuple named once, each name's array of the shape (and int/float dtype) the
comments next to the names state (written out below; the sizes are chosen distinct,
so that an array moved or inserted without renaming shows, a swap of two arrays of
one shape does not), and no two arrays sharing memory (most workspaces are views
into one buffer).  spark's and block-lstable's are in test_symplectic.py and
test_block.py."""
import numpy as np

from cosim.integrators import (bdf_record, explicit_record, ga_record, index1_kernel, li1_record,
                               rkc_record)


def _check(record, work, declared, ints=()):
    """``record``'s W_ names index ``work`` as ``declared`` ({name: shape}) says;
    ``ints``: the names of int64 arrays (the others are float64)."""
    names = {k: v for k, v in vars(record).items() if k.startswith("W_")}
    assert set(names) == set(declared)
    assert sorted(names.values()) == list(range(len(work)))
    for name, shape in declared.items():
        array = work[names[name]]
        assert array.shape == shape, name
        assert array.dtype == (np.int64 if name in ints else np.float64), name
    for k, a in enumerate(work):
        a[...] = k + 1
    assert all(np.all(a == k + 1) for k, a in enumerate(work))   # no array overwrote another


def _index1_form(n, m):
    """The index-1 form's arrays (index1_kernel), first in both explicit_record's and
    rkc_record's workspace: q, v, M, C_q, Q, γ, the right-hand side of eq. 88, C, C_t."""
    return {"W_Q": (n,), "W_V": (n,), "W_M": (n, n), "W_CQ": (m, n), "W_FORCES": (n,),
            "W_GAMMA": (m,), "W_RHS": (n + m,), "W_C": (m,), "W_CT": (m,)}


def test_explicit_work_array_names_follow_workspace_order():
    n, m, ny = 3, 2, 11   # ny: the n_y-vectors (7 stages of K)
    vectors = ("W_Y0", "W_Y_NEW", "W_Y_STAGE", "W_Y_PROJ", "W_ERR", "W_K2", "W_K3", "W_K4", "W_Y_FULL",
               "W_Y_HALF", "W_F_HALF", "W_F")
    declared = {**_index1_form(n, m), "W_K": (7, ny), "W_LAM": (m,), **{name: (ny,) for name in vectors}}
    _check(explicit_record, explicit_record.workspace(n, m, ny), declared)


def test_rkc_work_array_names_follow_workspace_order():
    n, m, ny, s_max = 3, 2, 11, 13
    declared = {**_index1_form(n, m), "W_RHS91": (n + m,), "W_F_END": (ny,), "W_LAM_END": (m,),
                "W_STAGES": (3, ny), "W_EST": (ny,), "W_F_TRIAL": (ny,), "W_PROBE": (ny,), "W_LAM_TRIAL": (m,),
                "W_COEF": (s_max, rkc_record.N_CF), "W_BAYO": (n, n), "W_BAYO_LU": (n, n), "W_BAYO_PIV": (n,),
                "W_F_START": (ny,), "W_Y_START": (ny,)}
    _check(rkc_record, rkc_record.rkc_workspace(n, m, ny, s_max), declared, ints=("W_BAYO_PIV",))


def test_index1_form_reads_the_same_arrays_in_both_records():
    """The W_ names the index-1 form uses are its own (_index1_form), at the same index
    in both records (rkc_record imports them from explicit_record)."""
    used = {k for k in vars(index1_kernel) if k.startswith("W_")}
    assert used and used <= set(_index1_form(1, 1))
    assert all(getattr(rkc_record, k) == getattr(explicit_record, k) for k in _index1_form(1, 1))


def test_local_index1_work_array_names_follow_workspace_order():
    n, m, g = 4, 2, 1
    r, k = m + g, n + m + g   # rows of [C_q; B]; the augmented matrix of eq. 2.5
    declared = {"W_Q": (n,), "W_V": (n,), "W_FORCES": (n,), "W_M": (n, n), "W_CQ": (r, n), "W_AUG": (k, k),
                "W_AUG_RHS": (k,), "W_AUG_PIV": (k,), "W_C": (r,), "W_CT": (r,),
                "W_NS_A": (n, n), "W_NS_V": (n, n), "W_NS_TAU": (n,), "W_NS_COLS": (n,), "W_AQ": (n, n),
                "W_AV": (n, n),
                **{name: (n,) for name in ("W_QK", "W_VK", "W_AK", "W_QE", "W_VE", "W_AE", "W_A")},
                **{name: (2 * n,) for name in ("W_X_PRED", "W_DELTA", "W_RESIDUAL", "W_EST", "W_WEIGHTS")},
                "W_J": (2 * n, 2 * n), "W_FD0": (r,), "W_FD1": (r,), "W_A0": (n,), "W_DPSI_DQ": (n, n),
                "W_DPSI_DV": (n, n), "W_LAM": (r,), "W_DVC_DQ": (r, n)}
    _check(li1_record, li1_record.workspace(n, m, g), declared, ints=("W_AUG_PIV", "W_NS_COLS"))


def test_generalized_alpha_work_array_names_follow_workspace_order():
    n, m, extra = 3, 2, 7
    n_vectors = ("W_Q", "W_V", "W_QDD", "W_FORCES", "W_Q0", "W_V0", "W_QDD0", "W_X_HAT", "W_SCALE", "W_SPARE",
                 "W_WV", "W_QD0", "W_Y_HAT", "W_SY", "W_CQT_MU_SCALE", "W_QD", "W_QX", "W_Q_START", "W_V_START",
                 "W_QDD_START", "W_A_START", "W_X_RATE", "W_WEIGHTS", "W_CQT_LAM_SCALE", "W_SCALE_R",
                 "W_CQT_LAM_SCALE_R", "W_MINV_DIAG", "W_X", "W_Q1", "W_V1", "W_QDD1")
    m_vectors = ("W_LAM", "W_C", "W_LAM_HAT", "W_MU", "W_CT", "W_G0", "W_G1", "W_LAM_START", "W_LAM_RATE",
                 "W_LAM1")
    declared = {**{name: (n,) for name in n_vectors}, **{name: (m,) for name in m_vectors},
                "W_M": (n, n), "W_CQ": (m, n), "W_CQT": (n, m), "W_CQ_START": (m, n), "W_CM": (m, n),
                "W_CMC": (m, m), "W_REST": (extra,)}
    _check(ga_record, ga_record.workspace(n, m, extra), declared)


def test_bdf_work_slots_follow_wslots_order():
    """bdf_record's WS_ names index wslots()'s tuple (starts in the 1-D work vector, in
    order, then its used length): each slot of the length its comment states, all
    inside the work vector; workspace()'s tuple (that vector, the five n×n, the m×n and
    the ns×ns matrices the kernel unpacks) without overlap."""
    n, m, ns = 3, 2, 11
    rows = bdf_record.ROWS
    declared = {"WS_WINV": 2 * n, "WS_YPRED": 2 * n, "WS_YDPRED": 2 * n, "WS_ZPRED": n + m, "WS_A0": n,
                "WS_LHAT": m, "WS_W2": 3 * n, "WS_Q": n, "WS_V": n, "WS_A": n, "WS_LAM": m, "WS_QF": n,
                "WS_DELTA": ns, "WS_F": ns, "WS_DY": 2 * n, "WS_QDD1": n, "WS_LAM1": m, "WS_COL": 6 * n,
                "WS_RHS": ns, "WS_TAU": rows, "WS_OMEGA": rows, "WS_CC": rows, "WS_CE": rows, "WS_CT": m,
                "WS_G0": m, "WS_G1": m, "WS_QX": n, "WS_MU": m, "WS_TQ": m, "WS_VX": n}
    names = {k: v for k, v in vars(bdf_record).items() if k.startswith("WS_")}
    slots = bdf_record.wslots(n, m, ns)
    assert set(names) == set(declared)
    assert sorted(names.values()) == list(range(len(slots) - 1))
    for name, length in declared.items():
        assert slots[names[name] + 1] - slots[names[name]] == length, name
    work = bdf_record.workspace(n, m, ns)
    assert slots[0] == 0 and slots[-1] <= work[0].size
    assert [a.shape for a in work[1:]] == [(n, n)] * 5 + [(m, n), (ns, ns)]
    for k, a in enumerate(work):
        a[...] = k + 1
    assert all(np.all(a == k + 1) for k, a in enumerate(work))
