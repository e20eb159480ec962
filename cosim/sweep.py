"""Parameter sweeps / Monte Carlo of whole runs on Dask (filled in below)."""


def sweep(spec, variations, client=None):  # pragma: no cover - replaced
    raise NotImplementedError
