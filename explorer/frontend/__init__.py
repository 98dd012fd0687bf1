"""Frontends turn user programs into Graphs: JAX functions (jax.py) and HLO text (hlo.py)."""
