"""Scatters (scatter-add and segment_sum's, -mul, -min, -max, plain scatter) as one parallel
loop, the accumulation strategy chosen per call by the statistics of the indices.

indexing_prepared.py lays a scatter out when the program is made (each index row's window:
its flat start from the row's indices, a grid of row offsets, a contiguous run). A scatter
with enough updates (PARALLEL_MIN elements, on more than one numba thread) then runs here,
in two steps, each a numba loop:

1. `starts`: every index row's flat start, or -1 where the window does not fit whole (JAX's
   modes exactly as the serial loop: "clip" clips the start first, the others drop the
   window), in parallel over the rows; and in the same pass the index statistics: whether
   the starts are sorted with none dropped, and how many update elements start in each of
   16 bins per thread of the output;
2. one of the strategies (STRATEGIES), the cheapest by a cost model of the statistics:
   - "owner": owner-computes: the output cut into one range per thread at the quantiles of
     where the updates land (the bins), each thread walking every index row in order and
     combining the part of its window inside its own range. Each output element sees its
     updates in the serial order, so the result is the serial loop's bit for bit (a plain
     scatter's later windows win as before). Good when the output is large against the
     updates; costs every thread a pass over the index rows, and the heaviest range's
     work when the indices are skewed;
   - "sorted": owner-computes over sorted starts: each thread finds its first and last row
     by binary search instead of walking them all; bit for bit as "owner";
   - "privatized": each thread combines a contiguous share of the rows into its own copy
     of the output (filled with the combine's identity), then the copies are combined into
     the output element by element, in thread order. Good when the output is small against
     the updates (few segments, skewed indices). Floating sums and products then add in a
     different order than the serial loop (equal within rounding; integer sums, min and max
     are exact but a max of +0.0 against -0.0 may keep the other zero). Not for the plain
     scatter (the later write must win), nor for bool or complex elements.

The serial loop (indexing_prepared.py) keeps small scatters and single-thread runs.
`Strategy.last` records the strategy the latest call took (bench/scatter.py prints it).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .indexing import combines
from .kernels import threads
from .numba_cache import cached_njit

PARALLEL_MIN = 1 << 15  # update elements before a scatter runs on every thread
BINS_PER_THREAD = 16
STRATEGIES = ("owner", "sorted", "privatized")


@functools.cache
def row_start() -> Any:
    """The numba inline start(idx, b, imap, strides, upper, batching, clip)."""
    from numba import njit

    @njit(inline="always", error_model="numpy")
    def start(idx, b, imap, strides, upper, batching, clip):  # noqa: ANN001, ANN202
        """Index row b's window's flat start in the output, or -1 where the window does not
        fit whole (JAX's scatter modes: "clip" clips the start first, the others drop the
        window); a numba inline, the serial loop's and the parallel ones'."""
        if imap.shape[0] == 1 and batching.shape[0] == 0:  # one index: no loop
            d = imap[0]
            s, hi = np.int64(idx[b, 0]), upper[d]
            if clip:
                s = min(max(s, 0), hi)
            return s * strides[d] if s >= 0 and s <= hi else -1
        base, fits = 0, True
        for m in range(batching.shape[0]):
            base += (b // batching[m, 1]) % batching[m, 2] * strides[batching[m, 0]]
        for k in range(imap.shape[0]):
            d = imap[k]
            s = np.int64(idx[b, k])
            if clip:
                s = 0 if s < 0 else (upper[d] if s > upper[d] else s)
            if s < 0 or s > upper[d]:
                fits = False
            base += s * strides[d]
        return base if fits else -1

    return start


@functools.cache
def _loops() -> dict[Any, Any]:
    from numba import njit, prange, uint64

    start = row_start()

    @njit(inline="always", error_model="numpy")
    def first_at(idx, imap, strides, upper, batching, clip, key):  # noqa: ANN001, ANN202
        """The first row whose start is at least `key` (the starts sorted, none dropped)."""
        lo, hi = 0, idx.shape[0]
        while lo < hi:
            mid = (lo + hi) // 2
            if start(idx, mid, imap, strides, upper, batching, clip) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    @cached_njit(parallel=True, error_model="numpy")
    def statistics(idx, imap, strides, upper, batching, clip, width, size, counts):  # noqa: ANN001, ANN202
        """Into counts[t], the update elements of thread t's share of the rows by the bin of
        the output they start in; whether the starts are sorted with none dropped."""
        rows, parts = idx.shape[0], counts.shape[0]
        shift = np.int64(0)  # bins of 2**shift elements (a shift, not a slow division)
        while (size - 1) >> shift >= counts.shape[1]:
            shift += 1
        ordered = np.ones(parts, np.bool_)
        for t in prange(parts):  # (each thread's flags and counts written apart: no line
            last, mine = np.int64(0), True  # shared between threads in the loop)
            b0 = t * rows // parts
            if b0 > 0:
                last = start(idx, b0 - 1, imap, strides, upper, batching, clip)
            for b in range(b0, (t + 1) * rows // parts):
                s = start(idx, b, imap, strides, upper, batching, clip)
                if s < last:  # a dropped row (-1) too
                    mine = False
                if s >= 0:
                    last = s
                    counts[t, s >> shift] += width
            ordered[t] = mine
        return ordered.all()

    def owner(combine):  # noqa: ANN001, ANN202
        @cached_njit(parallel=True, error_model="numpy")
        def fn(outf, idx, imap, strides, upper, batching, clip, grid, run, vals, cuts,  # noqa: ANN001, ANN202
               ordered):
            extent, width = grid[grid.shape[0] - 1] + run, grid.shape[0] * run
            for t in prange(cuts.shape[0] - 1):
                lo, hi = cuts[t], cuts[t + 1]
                first, end = 0, idx.shape[0]
                if ordered:  # the rows whose windows can reach [lo, hi)
                    first = first_at(idx, imap, strides, upper, batching, clip, lo - extent + 1)
                    end = first_at(idx, imap, strides, upper, batching, clip, hi)
                for b in range(first, end):
                    base = start(idx, b, imap, strides, upper, batching, clip)
                    if base < 0 or base >= hi or base + extent <= lo:
                        continue
                    if width == 1:  # one element per row (a 1-D segment_sum)
                        o = uint64(base + grid[0])
                        outf[o] = combine(outf[o], vals[uint64(b)])
                        continue
                    q = uint64(b * width)
                    for g in range(grid.shape[0]):
                        o = base + grid[g]
                        j0 = lo - o if lo > o else 0
                        j1 = hi - o if hi - o < run else run
                        # unsigned offsets (in bounds): numba wraps no index, the loop
                        # vectorizes
                        uo, p = uint64(o), q + uint64(g * run)
                        for j in range(j0, j1):
                            u = uint64(j)
                            outf[uo + u] = combine(outf[uo + u], vals[p + u])
        return fn

    def privatized(combine):  # noqa: ANN001, ANN202
        @cached_njit(parallel=True, error_model="numpy")
        def fn(outf, idx, imap, strides, upper, batching, clip, grid, run, vals, parts,  # noqa: ANN001, ANN202
               identity):
            n, rows, width = outf.shape[0], idx.shape[0], grid.shape[0] * run
            line = 64 // outf.itemsize  # each copy on cache lines of its own
            own = np.empty((parts, (n + line - 1) // line * line), outf.dtype)
            for t in prange(parts):
                mine = own[t, :n]
                mine[:] = identity
                for b in range(t * rows // parts, (t + 1) * rows // parts):
                    base = start(idx, b, imap, strides, upper, batching, clip)
                    if base < 0:
                        continue
                    if width == 1:
                        o = uint64(base + grid[0])
                        mine[o] = combine(mine[o], vals[uint64(b)])
                        continue
                    q = uint64(b * width)
                    for g in range(grid.shape[0]):
                        o, p = uint64(base + grid[g]), q + uint64(g * run)
                        for j in range(run):
                            u = uint64(j)
                            mine[o + u] = combine(mine[o + u], vals[p + u])
            for e in prange(n):  # the copies into the output, in thread order
                acc = outf[e]
                for t in range(parts):
                    acc = combine(acc, own[t, e])
                outf[e] = acc
        return fn

    made = combines()
    return {"statistics": statistics,
            **{("owner", k): owner(f) for k, f in made.items()},
            **{("privatized", k): privatized(f) for k, f in made.items() if k != "put"}}


def identity(combine: str, dtype: np.dtype) -> Any:
    """The combine's identity in `dtype` (what a privatized copy starts from): -0.0 for a
    float sum, so that an element no update reaches keeps its sign."""
    if combine == "add":
        return dtype.type(-0.0) if dtype.kind == "f" else dtype.type(0)
    if combine == "multiply":
        return dtype.type(1)
    if dtype.kind == "f":
        return dtype.type(np.inf if combine == "minimum" else -np.inf)
    info = np.iinfo(dtype)
    return dtype.type(info.max if combine == "minimum" else info.min)


@dataclass
class Strategy:
    """A scatter's parallel form: what the shapes allow, the strategy picked per call."""

    combine: str  # indexing.combines()'s name: put, add, multiply, minimum, maximum
    dtype: np.dtype
    rows: int
    width: int  # update elements per index row
    size: int  # output elements
    force: str | None = None  # a strategy to take whatever the statistics (tests, benches)
    last: str = field(default="", compare=False)

    @property
    def can_privatize(self) -> bool:
        return self.combine != "put" and self.dtype.kind in "iuf"

    def method(self) -> str:
        """What the listing says."""
        kinds = "owner-computes, sorted owner-computes" + (
            " or privatized" if self.can_privatize else "")
        return (f"one parallel loop over {self.rows} index rows: {kinds}, picked per call "
                f"by the index statistics (scatter_parallel.py)")

    def pick(self, ordered: bool, counts: np.ndarray, parts: int) -> tuple[str, np.ndarray]:
        """(strategy, cuts): the cheapest by the index statistics, in element steps per
        thread; cuts: the owner ranges' flat bounds (parts + 1 of them)."""
        total = int(counts.sum())
        cum = np.cumsum(counts)
        span = 1 << max(0, (self.size - 1) // len(counts)).bit_length()  # as `starts` bins
        # cut at the bins where the running count passes each thread's share
        edges = np.searchsorted(cum, (np.arange(1, parts) * total) / parts, side="left") + 1
        cuts = np.concatenate([[0], np.minimum(edges * span, self.size), [self.size]])
        # on cache-line bounds, so that no two threads write one line
        line = max(1, 64 // self.dtype.itemsize)
        cuts = np.minimum((cuts + line // 2) // line * line, self.size)
        cuts[-1] = self.size
        cuts = np.maximum.accumulate(cuts).astype(np.int64)
        before = [int(cum[b - 1]) if b > 0 else 0 for b in -(-cuts // span)]
        heaviest = int(np.diff(before).max())
        scan = self.rows // parts if ordered else self.rows
        costs = {"sorted" if ordered else "owner": scan + heaviest}
        if self.can_privatize and parts * self.size <= 4 * max(total, 1):
            # + filling its copy and its share of combining the copies: streaming, vectorized
            # loops, about half the cost of an update element each
            costs["privatized"] = -(-total // parts) + self.size
        if self.force == "privatized" and self.can_privatize:
            return "privatized", cuts
        if self.force is not None:  # sorted only where the starts are
            return "sorted" if ordered and self.force == "sorted" else "owner", cuts
        return min(costs, key=costs.__getitem__), cuts

    def __call__(self, outf: np.ndarray, idx: np.ndarray, laid: tuple[Any, ...], clip: bool,
                 vals: np.ndarray) -> None:
        loops = _loops()
        imap, strides, upper, batching, grid, run = laid
        parts = threads()
        counts = np.zeros((parts, BINS_PER_THREAD * parts), np.int64)
        rows = (idx, imap, strides, upper, batching, clip)
        ordered = loops["statistics"](*rows, np.int64(self.width), np.int64(self.size), counts)
        self.last, cuts = self.pick(bool(ordered), counts.sum(0), parts)
        if self.last == "privatized":
            loops[("privatized", self.combine)](outf, *rows, grid, run, vals, parts,
                                               identity(self.combine, self.dtype))
        else:
            loops[("owner", self.combine)](outf, *rows, grid, run, vals, cuts,
                                           self.last == "sorted")


def plan(combine: str, dtype: np.dtype, rows: int, width: int, size: int) -> Strategy | None:
    """The parallel form of a scatter of these sizes, or None (the serial loop then runs:
    few updates, an empty output)."""
    if rows * width < PARALLEL_MIN or size == 0:
        return None
    return Strategy(combine, np.dtype(dtype), rows, width, size)
