"""Benchmarks' models: they live in explorer.examples, shared with tests and tutorials."""

from explorer.examples import mlp_attention, mlp_attention_grad  # noqa: F401
