"""Figures of a run and of a sweep (matplotlib, Agg): ``cosim simulate --plot``,
``cosim run --plot``, ``cosim demo`` and ``cosim sweep --plot``.

Rules, the same for every figure:

* **one axis per unit**: the signals of a run are grouped by their unit (the model's
  outputs and inputs; a block output carries the unit of the plant input it drives);
  each group gets its own panel with the unit on the y axis, so a 0.3 rad angle is
  never drawn on a 10 N scale; a signal without a declared unit gets a panel of its own;
* **references against what they command**: a signal that feeds a block input named
  ``reference`` (a PD set point, a state-feedback reference) is drawn dashed in the
  panel of the plant output that block measures (``angle -> pd.measurement``);
* **no empty panels**: a signal constant over the whole run (an unused input held at 0,
  an alarm that never fired) is not drawn; the figure lists those with their values;
  the constraint-residual panel appears only for a model with constraints, the BDF
  order panel only when the order varies;
* a model without outputs shows its coordinates (one panel; the model declares no
  units for them);
* a sweep: every run's first recorded signal against time, coloured by the first
  varied quantity with a colour bar that names it with its unit; below, each metric
  against each varied quantity, coloured the same way.
"""
from __future__ import annotations

import numpy as np

MAX_PANELS = 6          # signal panels of a run (the units beyond share the last one)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _connections(r):
    from .simulation import _parse_connection
    from .spec import thaw
    return [_parse_connection(c) for c in thaw(r.spec.connections)] if r.spec is not None else []


def reference_targets(r):
    """{reference signal: the plant output it commands}: the source of a block input
    ``reference`` (a connection, or an external input ``block.reference``) and the plant
    output that feeds the same block's first other input (PID ``measurement``, state
    feedback ``x0``)."""
    conns = _connections(r)
    into = {dst: src for src, dst in conns}
    out = {}
    for block in (b["name"] for b in r.blocks):
        ref = f"{block}.reference"
        source = into.get(ref, ref if ref in r.input_names else None)
        if source is None:
            continue
        for src, dst in conns:
            base = src[6:] if src.startswith("plant.") else src
            if dst.startswith(block + ".") and dst != ref and base in r.plant_output_names:
                out[source] = base
                break
    return out


def _series(r):
    """[(name, values, unit, drawstyle)] of what a run shows, and [(name, value, unit)]
    of the signals constant over the run."""
    n_plant = len(r.plant_output_names)
    rows = []
    driven = {dst[6:] if dst.startswith("plant.") else dst for _, dst in _connections(r)}
    for j, name in enumerate(r.output_names):
        # a block output recorded at t_k was computed at its last sample before t_k
        rows.append((name, r.outputs[:, j], "default" if j < n_plant else "steps-pre"))
    for j, name in enumerate(r.input_names):
        if name not in driven:                     # inputs recorded at t_k hold from t_k on
            rows.append((name, r.inputs[:, j], "steps-post"))
    if not r.output_names:                         # a model without outputs: its coordinates
        rows = [(n, r.states[:, i], "default") for i, n in enumerate(r.coordinate_names)] + \
            [row for row in rows if row[0] in r.input_names]
    shown, constant = [], []
    for name, values, style in rows:
        unit = r.units.get(name, "")
        if values.size and np.all(values == values[0]):
            constant.append((name, float(values[0]), unit))
        else:
            shown.append((name, values, unit, style))
    return shown, constant


def _unit_label(unit):
    return unit or "no unit declared"


def run_panels(r):
    """[(unit, [(name, values, style, is_reference)])] in the order the signals come,
    references placed with the output they command; and the constant signals."""
    shown, constant = _series(r)
    refs = reference_targets(r)

    def key(name, unit):   # signals without a declared unit share no axis: one each
        return unit if unit not in ("", "1") else (unit, name)
    keys = {name: key(name, unit) for name, _, unit, _ in shown}
    panels = {}
    for name, values, unit, style in shown:
        target = refs.get(name)
        k = keys[target] if target is not None and target in keys else keys[name]
        panels.setdefault(k, []).append((name, values, style, target))
    groups = [(k if isinstance(k, str) else k[0], lines) for k, lines in panels.items()]
    if len(groups) > MAX_PANELS:   # the rest share the last panel (labels keep their units)
        rest = [(n, v, s, t) for _, lines in groups[MAX_PANELS - 1:] for n, v, s, t in lines]
        groups = groups[:MAX_PANELS - 1] + [("various", rest)]
    return groups, constant


def _draw_run(axes, r, groups):
    drives = {}
    for src, dst in _connections(r):
        base = dst[6:] if dst.startswith("plant.") else dst
        if base in r.plant_output_names or "." not in base:   # a plant input
            drives.setdefault(src, base)
    for ax, (unit, lines) in zip(axes, groups):
        for name, values, style, target in lines:
            if target is not None:
                ax.plot(r.time, values, ls="--", lw=1.2, drawstyle=style,
                        label=f"{name} (reference of {target})")
            else:
                label = name + (f" -> {drives[name]}" if name in drives else "")
                if unit == "various":
                    label += f" [{r.units.get(name, '')}]"
                ax.plot(r.time, values, drawstyle=style, label=label)
        for ev in r.events:
            if ev.get("kind") in ("state", "stop"):
                ax.axvline(ev["time"], color="0.6", lw=0.6, ls=":")
        own = [n for n, _, _, t in lines if t is None]
        if unit == "various":
            ax.set_ylabel("various units")
        elif len(own) == 1:
            ax.set_ylabel(f"{own[0]} [{_unit_label(unit)}]")
        else:
            ax.set_ylabel(f"[{_unit_label(unit)}]")
        ax.legend(fontsize=7, ncol=min(3, len(lines)), loc="best")
        ax.grid(True, lw=0.3, alpha=0.5)


def drawn(fig, constant=()):
    """What a figure shows, read back from its axes: {"panels": [(y label, [legend
    labels])], "colorbars": [labels], "xlabels": [per panel], "constant": [names]}."""
    panels, bars, xlabels = [], [], []
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            bars.append(ax.get_ylabel())
        else:
            panels.append((ax.get_ylabel(), ax.get_legend_handles_labels()[1]))
            xlabels.append(ax.get_xlabel())
    return {"panels": panels, "colorbars": bars, "xlabels": xlabels,
            "constant": [c[0] for c in constant]}


def _constant_note(fig, constant):
    if constant:
        text = ", ".join(f"{n} = {v:g}" + (f" {u}" if u and u != "1" else "") for n, v, u in constant)
        fig.text(0.01, 0.005, f"constant over the run (not drawn): {text}", fontsize=7, color="0.3",
                 va="bottom", wrap=True)


def write_run_plot(path, r, title=None, residuals=False, levels=None):
    """A run's figure (module doc).  ``residuals``: add the constraint-residual panel
    (|residual| of the recorded rows per level, log scale) when the model has
    constraints; ``levels``: the levels to draw (default position and velocity).
    Returns what was drawn (:func:`drawn`)."""
    plt = _pyplot()
    groups, constant = run_panels(r)
    res = np.abs(r.residuals)
    levels = tuple(levels or ("position", "velocity"))
    cols = {"position": 0, "velocity": 1, "acceleration": 2}
    show_res = residuals and r.model_kind == "multibody" and bool(
        np.nanmax(res[:, :2], initial=0.0) > 0.0)
    show_order = bool(np.isfinite(r.order).any() and np.nanmin(r.order) != np.nanmax(r.order))
    n = max(1, len(groups)) + show_res + show_order
    fig, axes = plt.subplots(n, 1, figsize=(8, 2.4 * n + 0.6), sharex=True, squeeze=False)
    axes = list(axes[:, 0])
    _draw_run(axes, r, groups)
    k = len(groups)
    if show_res:
        ax = axes[k]
        for level in levels:
            vals = res[:, cols[level]]
            keep = np.isfinite(vals)
            if not keep.any():
                continue
            style = dict(ls="none", marker="o", ms=3) if keep.sum() < 0.5 * len(vals) else {}
            ax.semilogy(r.time[keep], np.maximum(vals[keep], 1e-17), label=level, **style)
        ax.set_ylabel("|constraint residual|")
        ax.legend(fontsize=7, title="recorded rows", title_fontsize=7)
        ax.grid(True, lw=0.3, alpha=0.5)
        k += 1
    if show_order:
        axes[k].step(r.time, r.order, where="post")
        axes[k].set_ylabel("BDF order")
    axes[0].set_title(title or f"{r.model}: {r.method} ({r.backend} backend)", fontsize=10)
    axes[-1].set_xlabel("time [s]")
    fig.tight_layout(rect=(0, 0.03 if constant else 0, 1, 1))
    _constant_note(fig, constant)
    fig.savefig(path, dpi=110)
    shown = drawn(fig, constant)
    plt.close(fig)
    return shown


# -- sweeps ---------------------------------------------------------------------------------
def quantity_unit(spec, name):
    """The unit of a varied quantity: a model parameter's declared unit, seconds for the
    times and steps, '' otherwise."""
    if name in ("stop_time", "start_time", "communication_step", "h"):
        return "s"
    if name.startswith("blocks.") or name in ("rtol", "atol"):
        return ""
    from .errors import CosimError
    from .models import model_class
    try:
        cls = model_class(spec.model_reference() if spec.model_format == "urdf" else spec.model)
        params = {p.name: p.unit for p in cls.parameters}
    except (CosimError, AttributeError, TypeError):
        return ""
    unit = params.get(name[7:] if name.startswith("params.") else name, "")
    return "" if unit == "1" else unit


def _with_unit(name, unit):
    return f"{name} [{unit}]" if unit else name


def write_sweep_plot(path, result):
    """A sweep's figure (module doc); returns what was drawn (:func:`drawn`)."""
    plt = _pyplot()
    from matplotlib import cm, colors

    from .sweep import RunFailure
    ok = [(i, r) for i, r in enumerate(result.results) if not isinstance(r, RunFailure)]
    names = list(result.variations.names)
    metrics = result.metric_names()
    table = result.runs_table()
    spec = result.specs[0]
    panels = 1 + (len(metrics) * len(names) if names else 0)
    panels = min(panels, 7)
    fig, axes = plt.subplots(panels, 1, figsize=(8, 2.7 * panels + 0.4), squeeze=False)
    axes = list(axes[:, 0])
    bar = None
    if not names:
        def color_of(i):
            return "C0"
    else:
        key = names[0]
        values = np.array(table.column(key).to_pylist(), dtype=float)
        norm = colors.Normalize(vmin=np.nanmin(values), vmax=np.nanmax(values))
        if norm.vmin == norm.vmax:
            norm = colors.Normalize(vmin=norm.vmin - 0.5, vmax=norm.vmax + 0.5)
        cmap = plt.get_cmap("viridis")

        def color_of(i):
            return cmap(norm(values[i]))
        bar = (cm.ScalarMappable(norm=norm, cmap=cmap), _with_unit(key, quantity_unit(spec, key)))
    ax = axes[0]
    if ok:
        sig = next(iter(result._signals(ok[0][1])))
        for i, r in ok[:300]:
            ax.plot(r.time, result._signals(r)[sig], color=color_of(i), lw=0.9)
        unit = ok[0][1].units.get(sig, "")
        ax.set_ylabel(_with_unit(sig, "" if unit == "1" else unit))
        ax.set_xlabel("time [s]")
        shown = f"{len(ok)} runs" if len(ok) <= 300 else f"300 of {len(ok)} runs"
        ax.set_title(f"{shown} of {spec.name or spec.model}"
                     + (f", coloured by {bar[1]}" if bar else ""), fontsize=10)
        ax.grid(True, lw=0.3, alpha=0.5)
    if bar is not None:
        fig.colorbar(bar[0], ax=ax, label=bar[1])
    k = 1
    units = ok[0][1].units if ok else {}
    for m in metrics:
        for n in names:
            if k >= panels:
                break
            a = axes[k]
            x = np.array(table.column(n).to_pylist(), dtype=float)
            y = np.array(table.column(m).to_pylist(), dtype=float)
            a.scatter(x, y, c=[color_of(i) for i in range(len(x))], s=14)
            a.set_xlabel(_with_unit(n, quantity_unit(spec, n)))
            sig = m.split(":", 1)[1] if ":" in m else ""
            unit = "s" if m.startswith("settling_time") else units.get(sig, "")
            a.set_ylabel(_with_unit(m, "" if unit == "1" else unit))
            a.grid(True, lw=0.3, alpha=0.5)
            if bar is not None and n != names[0]:   # else the x axis already says it
                fig.colorbar(bar[0], ax=a, label=bar[1])
            k += 1
    failed = len(result.results) - len(ok)
    if failed:
        fig.text(0.01, 0.005, f"{failed} failed runs not drawn (runs.parquet, column error)",
                 fontsize=7, color="0.3")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    shown = drawn(fig)
    plt.close(fig)
    return shown


__all__ = ["write_run_plot", "write_sweep_plot", "run_panels", "reference_targets", "quantity_unit",
           "drawn"]
