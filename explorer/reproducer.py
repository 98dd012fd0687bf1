"""The names that reproducer scripts written before the measure/ package import
(`from explorer.reproducer import bind_opaque, compare, not_finite, random_inputs`): a saved
reproducer keeps running. New scripts import explorer/measure/ directly."""

from .measure.inputs import random_inputs
from .measure.reproducer import bind_opaque, compare, not_finite

__all__ = ["bind_opaque", "compare", "not_finite", "random_inputs"]
