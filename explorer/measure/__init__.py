"""Measurement: functions of a trace (compare, profile, roofline, memory timeline, machine
peaks) and the measuring code the backends share."""
