"""Host side: an FMU of ours opened with fmpy and initialised (benchmarks, tests)."""


def open_slave(path, instance_name="host", start_time=0.0):
    """(FMU2Slave instantiated and initialised at ``start_time``, {variable name: value
    reference}) for the FMU file ``path`` (fmpy extracts it to a temporary folder)."""
    from fmpy import extract, read_model_description
    from fmpy.fmi2 import FMU2Slave

    md = read_model_description(str(path))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    fmu = FMU2Slave(guid=md.guid, unzipDirectory=extract(str(path)),
                    modelIdentifier=md.coSimulation.modelIdentifier, instanceName=instance_name)
    fmu.instantiate()
    fmu.setupExperiment(startTime=start_time)
    fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    return fmu, vr
