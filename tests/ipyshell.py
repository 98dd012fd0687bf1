"""The IPython shell the magic tests drive."""

from __future__ import annotations


def ipython_shell():
    """The test IPython shell with the extension loaded (start_ipython makes it once per
    process and returns None after; globalipapp.get_ipython gives it then)."""
    from IPython.testing.globalipapp import get_ipython, start_ipython

    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "explorer")
    return shell
