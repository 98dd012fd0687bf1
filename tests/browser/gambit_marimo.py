"""The widget in marimo: tests/browser/test_marimo.py serves this notebook with `marimo edit`,
steps through the passes and runs a stage from the widget. Open it yourself with
`marimo edit tests/browser/gambit_marimo.py`."""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full")


@app.cell
def _():
    import jax.numpy as jnp
    import marimo as mo
    import numpy as np

    import explorer as gx

    return gx, jnp, mo, np


@app.cell
def _(gx, jnp, np):
    def distances(x, y):
        xy = jnp.sum(x[:, None, :] * y[None, :, :], axis=-1)
        sq = jnp.sum(x * x, axis=1)[:, None] * 1.0 + 0.0
        return sq - 2.0 * xy + jnp.sum(y * y, axis=1)[None, :]

    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    y = rng.standard_normal((5, 4)).astype(np.float32)
    trace = gx.explore(distances, x, y)
    return (trace,)


@app.cell
def _(mo, trace):
    widget = mo.ui.anywidget(trace.widget())
    widget  # noqa: B018 - a cell shows its last expression
    return (widget,)


@app.cell
def _(mo, widget):
    # reruns whenever the widget's state changes: the stage chosen in the browser, in Python
    _stage = widget.trace.stages[widget.index]
    mo.md(f"Python sees stage **{widget.index}**: `{_stage.name}`").callout()
    return


if __name__ == "__main__":
    app.run()
