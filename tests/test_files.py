"""Files written whole (explorer/files.py): a reader sees the old text or the new,
and no temporary file is left behind."""

from __future__ import annotations

import pytest

from explorer import files
from explorer.files import replacing, write_atomic


def test_the_text_replaces_the_file_whole_and_leaves_nothing_beside_it(tmp_path):
    path = tmp_path / "peaks.json"
    write_atomic(path, "old")
    write_atomic(path, "new")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["peaks.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "page.html"
    write_atomic(path, "old")

    def broken(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_a_path_written_by_someone_else_replaces_the_file_only_when_the_block_ends(tmp_path):
    path = tmp_path / "kernel.so"
    with replacing(path) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".so" and tmp != path
        tmp.write_bytes(b"built")
        assert not path.exists()
    assert path.read_bytes() == b"built"
    with pytest.raises(RuntimeError), replacing(path) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("the compiler failed")
    assert path.read_bytes() == b"built"
    assert [p.name for p in tmp_path.iterdir()] == ["kernel.so"]
