"""FMI 2.0 Co-Simulation adapter of cosim.

``fmu.builder.build_fmu`` / ``cosim fmu build`` pack a model or scenario as an
FMU; ``fmu.slave.CosimSlave`` is the slave that runs inside it (a thin layer
over :class:`cosim.Simulation`); ``fmu.native`` the FMU binary; ``fmu.bundle``
the private code package of each FMU.  Kept import-free: the FMU bundles
``slave`` and ``examples`` and loads only ``slave`` at run time.
"""
