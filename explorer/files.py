"""Writing a file so that no reader ever sees half of it: the content goes to a temporary file
of its own beside the target (a name no other process or thread uses), which then replaces
the target in one step (os.replace). Two processes writing the same path leave one whole
file, never a mix; a reader sees the old file or the new one. Every cache and artifact written
under a shared path goes through here: generated kernel modules, the measured peaks, reproducer
scripts, exported pages, and the tests' built libraries, screenshots and notebooks."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside `path` for the caller to write; when the block ends without an
    error, it replaces `path` whole (else it is removed and `path` is untouched)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}.",
                               suffix=f".tmp{target.suffix}")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` (UTF-8) to `path`, replacing it whole."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
