"""Recording from the dense output vs landing on every row (issue 17).

``cosim simulate andrews --t-end T`` records 500 rows.  "dense": one communication
step, rows read from the integrator's dense output (what ``cosim simulate`` does
without ``--dt``); "landing": communication steps of T/500, the integrator lands
on every row (``--dt T/500``, what it did before).  Best of 2 warm runs; steps and
Newton iterations show the work the landing forces.

    python benchmarks/recording.py
"""
import time

import cosim


def simulation_spec(model, t_end, backend, dt=None):
    """The spec `cosim simulate MODEL --t-end T [--dt DT] --backend B` runs."""
    return cosim.SimulationSpec.from_dict({"model": model, "method": "generalized-alpha",
                                           "stop_time": t_end, "communication_step": dt,
                                           "backend": backend})


def main():
    print(f"{'backend':8s} {'t_end':>6s} {'recording':>9s} {'wall [s]':>9s} {'steps':>6s} {'newton':>7s}")
    for backend in ("numba", "python"):
        for t_end in (0.001, 0.03):
            specs = {"dense": simulation_spec("andrews", t_end=t_end, backend=backend),
                     "landing": simulation_spec("andrews", t_end=t_end, dt=t_end / 500, backend=backend)}
            for s in specs.values():
                cosim.run(s)  # warm (compiled kernels, caches)
            for label, s in specs.items():
                best = float("inf")
                for _ in range(2):
                    t0 = time.perf_counter()
                    r = cosim.run(s)
                    best = min(best, time.perf_counter() - t0)
                print(f"{r.backend:8s} {t_end:6g} {label:>9s} {best:9.3f} {r.stats['steps']:6d} "
                      f"{r.stats['newton_iterations']:7d}")


if __name__ == "__main__":
    main()
