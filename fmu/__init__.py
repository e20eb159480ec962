"""FMI 2.0 Co-Simulation adapter of cosim (pythonfmu).

``fmu.builder.build_fmu`` / ``cosim fmu build`` pack a model or scenario as an
FMU; ``fmu.slave.CosimSlave`` is the slave that runs inside it (a thin layer
over :class:`cosim.Simulation`).  Kept import-free: the FMU bundles this
package and loads only ``fmu.slave`` at run time.
"""
