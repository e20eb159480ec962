"""cosim.lapack: scipy's LAPACK functions loaded without importing scipy.linalg are
scipy.linalg.lapack's own (the same objects, so the same numbers), and scipy.linalg
imports and works normally afterwards.  In a fresh process (scipy.linalg not yet
imported)."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r'''
import json, sys
import numpy as np
from cosim import lapack
from cosim.integrators.common import lu_factor, lu_solve
getrf, geqp3 = lapack.function("dgetrf"), lapack.function("dgeqp3")
A = np.random.default_rng(3).standard_normal((6, 6))
x = lu_solve(lu_factor(A), np.arange(6.0))
before = "scipy.linalg" in sys.modules
import scipy.linalg as sla
same = (getrf is sla.lapack.dgetrf
        and geqp3 is sla.get_lapack_funcs(("geqp3",), (np.zeros(1),))[0])
reference = sla.lu_solve(sla.lu_factor(A), np.arange(6.0))
print(json.dumps({"scipy_linalg_before": before, "same": bool(same),
                  "bits": x.tobytes() == reference.tobytes(),
                  "qr": bool(np.allclose(sla.qr(A)[0] @ sla.qr(A)[1], A))}))
'''


def test_lapack_functions_are_scipys_without_importing_scipy_linalg(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"scipy_linalg_before": False, "same": True, "bits": True, "qr": True}
