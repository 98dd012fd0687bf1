from explorer.view.diff import ir_diff

A = "graph @f {\n" + "".join(f"  %{i} = f32[] add(%0, %0)\n" for i in range(1, 12)) + "  return %11\n}"


def test_identical_stages_fold_to_one_row():
    d = ir_diff(A, A)
    assert not d.changed
    assert [r[0] for r in d.rows] == ["skip"]


def test_replace_rows_pair_lines_side_by_side():
    b = A.replace("%8 = f32[] add", "%8 = f32[] mul")
    d = ir_diff(A, b, context=1)
    tags = [r[0] for r in d.rows]
    assert tags == ["skip", "equal", "replace", "equal", "skip"]
    row = d.rows[2]
    assert row[1] == row[3] == 9 and "add" in row[2] and "mul" in row[4]
    assert d.rows[0][2] == "7 unchanged lines"
    text = d.to_text()
    assert "|" in text.splitlines()[2] and "unchanged lines" in text
    assert len(ir_diff(A, b, context=3).rows) == 1 + 3 + 1 + 5  # no head before line 1; the tail run is short


def test_inserted_and_deleted_lines():
    b = A.replace("  %3 = f32[] add(%0, %0)\n", "")
    d = ir_diff(A, b, context=0)
    deleted = [r for r in d.rows if r[0] == "delete"]
    assert len(deleted) == 1 and deleted[0][3] is None and "%3" in deleted[0][2]
    d2 = ir_diff(b, A, context=0)
    assert [r[0] for r in d2.rows if r[0] != "skip"] == ["insert"]


def test_html_escapes_user_text():
    hostile = 'loc("</script><script>alert(1)</script>", 1, "<f&>")'
    d = ir_diff(A, A.replace("return %11", f"return %11 {hostile}"))
    page = d._repr_html_()
    assert "<script>" not in page and "&lt;/script&gt;&lt;script&gt;" in page
    assert "&lt;f&amp;&gt;" in page


def test_diff_of_stages(toy_trace):
    d = ir_diff(toy_trace.stages[0].graph, toy_trace.stages[1].graph)
    assert d.changed
    changed = [r for r in d.rows if r[0] == "replace"]
    assert len(changed) == 1 and " mul(" in changed[0][2] and " add(" in changed[0][4]
