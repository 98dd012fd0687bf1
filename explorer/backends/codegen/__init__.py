"""The target-neutral code generator: one kernel emitter and one map-reduce emitter that read
a `Dialect` (numba/Python on the CPU, CUDA C++ on the GPU) for syntax, scalar forms and
runtime helpers."""
