// Keeps the FMU binary loadable on glibc 2.28 (Debian 10, RHEL 8, Ubuntu 20.04's
// 2.31, manylinux_2_28) when it is built on a newer one.  Included once, by
// cosim_fmi2.cpp; fmu/native/__init__.py links with the matching --wrap options.
//
// The binary links libstdc++ statically (a host's own older libstdc++, e.g.
// MATLAB's, must not decide whether it loads).  Parts of a newer static
// libstdc++ reference glibc symbols newer than 2.28 even though the FMU never
// uses them:
//  * __libc_single_threaded (GLIBC_2.32), read by the reference counting of
//    libstdc++'s strings and exceptions: here always 0, "more than one thread",
//    so they always take the atomic path (correct, as on glibc < 2.32);
//  * arc4random (GLIBC_2.36), used by std::random_device, which the FMU does
//    not use: here from getentropy (GLIBC_2.25).
// libgcc is linked dynamically (libgcc_s.so.1): its static unwinder references
// _dl_find_object (GLIBC_2.35) and pthread symbols of GLIBC_2.34.
// tests/test_fmu_hosts.py checks the binary's highest GLIBC version with objdump -T.
#ifndef COSIM_GLIBC_COMPAT_H
#define COSIM_GLIBC_COMPAT_H

#include <cstdlib>
#include <unistd.h>

extern "C" {

__attribute__((visibility("hidden"))) char __wrap___libc_single_threaded = 0;

__attribute__((visibility("hidden"))) unsigned int __wrap_arc4random(void)
{
    unsigned int value = 0;
    if (getentropy(&value, sizeof value) != 0) std::abort();  // never used by the FMU
    return value;
}

}  // extern "C"

#endif  // COSIM_GLIBC_COMPAT_H
