"""Writing a file so that no reader ever sees half of it: the text goes to a temporary file
of its own beside the target, which then replaces the target in one step (os.replace). Two
processes writing the same path leave one whole file, never a mix; a reader sees the old
file or the new one. The measured peaks' cache, reproducer scripts and exported pages are
written this way."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` (UTF-8) to `path`, replacing it whole."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
