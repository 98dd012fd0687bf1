"""The target-neutral code generator: the kernel IR (kernel_plan.py, mapreduce_plan.py), one
kernel emitter (kernel_emitter.py) and one map-reduce emitter (mapreduce_emitter.py) that
read a `Dialect` (dialect.py; numba/Python in cpu/numba_dialect.py, CUDA C++ in
gpu/cuda_dialect.py) for syntax, scalar forms and runtime helpers. Adding a target is a
dialect plus a runtime module (the helpers its generated code calls)."""
