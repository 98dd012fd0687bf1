"""Measurement: functions of a trace and the measuring code they share.

    compare.py     trace.compare: stages on backends against the baselines
    profile.py     trace.profile: a stage's time, node by node
    bodies.py      the profile's times of nodes inside regions the interpreter core runs
    roofline.py    trace.roofline: kernels, dots and loops under the machine's peaks
    timeline.py    trace.memory_timeline: planned and measured live bytes along a schedule
    numerics.py    trace.numerics: each stage's and node's error against float64, and the
                   stage and firing that moved the outputs
    reproducer.py  stage.reproducer: a standalone script that checks a stage or a kernel
    latest.py      every profile, roofline and timeline taken of each trace, and its numerics
    peaks.py       this machine's FLOP/s and bandwidth, measured once and cached
    timing.py      repeats, medians, peak memory of a graph or a JAX function
    closeness.py   how close outputs are: the project's one tolerance check
    inputs.py      random inputs for a graph's parameters
    protocol.py    what a trace offers to this layer and the view (trace.py is not imported)
"""
