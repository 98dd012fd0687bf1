"""Analyses of a graph: cost (FLOPs, bytes) and memory (schedule, liveness, planned peak)."""
