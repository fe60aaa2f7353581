"""The math kernels NLU training runs on, the same on every x86-64 machine with AVX2.

numpy and OpenBLAS choose their kernels by CPU when they load (AVX-512 ones where there are),
and those differ from the AVX2 ones in the last bits of a float: enough to change the bytes of
a trained model. Training therefore runs in a process started with these set (numpy's AVX-512
dispatch off, OpenBLAS's Haswell kernels): `hermes nlu train` starts one, and the test suite
sets them before anything loads numpy. This module imports nothing, so it can be read first.
"""

from __future__ import annotations

PORTABLE_KERNELS = {
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
    "OPENBLAS_CORETYPE": "Haswell",
}
