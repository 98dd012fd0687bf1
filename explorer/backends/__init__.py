"""Backends execute graphs: the reference interpreter (the oracle), CPU, GPU and JAX."""
