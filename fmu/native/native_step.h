// The compiled method a cosim FMU steps without Python (cosim.jit.native_step_address):
// a numba cfunc with a plain C signature, compiled once per machine for every method
// and model.  Arrays are C-contiguous: the method's record S (n_S doubles), I (n_I
// int64), the kept iteration-matrix factors LU (N x N), the held inputs u, the model's
// parameters p, the outputs y_out it writes after a successful advance, and
// n_functions x 2 addresses: the model's compiled functions (cosim.jit.model_functions),
// then the method's compiled entry (cosim.jit.native_addresses).  Modes as the
// method kernel's entry(): 0 advance to t_target within max_steps, 3 restart (new
// inputs held) then advance.  Returns the kernel's status: 0 done; anything else
// means the record is as it was (all or nothing) and Python must take the step.
#pragma once
#include <cstdint>

typedef std::int64_t (*CosimNativeStep)(std::int64_t mode, double* S, std::int64_t n_S,
    std::int64_t* I, std::int64_t n_I, double* LU, std::int64_t N, double* u, std::int64_t n_u,
    double* p, std::int64_t n_p, double t_target, std::int64_t max_steps, double* y_out,
    std::int64_t n_y, std::int64_t* addresses, std::int64_t n_functions);
