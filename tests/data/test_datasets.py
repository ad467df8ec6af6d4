"""Dataset readers and row checks: errors name file, line, row and column."""

from __future__ import annotations

import json

import pytest

from grpo_fast import data
from grpo_fast.errors import UserError

PROMPT = [{"role": "user", "content": "hi"}]


def test_jsonl_broken_line_is_named(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"a": 1}\n{"a": 2\n{"a": 3}\n')
    with pytest.raises(UserError) as err:
        data.read_rows(str(path))
    assert "d.jsonl:2" in str(err.value) and "broken JSON" in str(err.value)


def test_csv_reading_and_errors(tmp_path):
    good = tmp_path / "kb.csv"
    good.write_text("question,answer\nWhat?,That\n")
    assert data.read_rows(str(good)) == [{"question": "What?", "answer": "That"}]
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(UserError, match="empty"):
        data.read_rows(str(empty))
    latin = tmp_path / "latin.csv"
    latin.write_bytes("question,answer\ncaf\xe9,x\n".encode("latin-1"))
    with pytest.raises(UserError) as err:
        data.read_rows(str(latin))
    assert "not UTF-8" in str(err.value) and "latin.csv:2" in str(err.value)
    header_only = tmp_path / "h.csv"
    header_only.write_text("question,answer\n")
    with pytest.raises(UserError, match="no rows"):
        data.read_rows(str(header_only))


def test_json_and_parquet(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps([{"x": 1}, {"x": 2}]))
    assert len(data.read_rows(str(path))) == 2
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{"x": 1}]), tmp_path / "d.parquet")
    assert data.read_rows(str(tmp_path / "d.parquet")) == [{"x": 1}]
    with pytest.raises(UserError, match="does not exist"):
        data.read_rows(str(tmp_path / "missing.jsonl"))


def test_validate_names_row_and_column():
    rows = [{"prompt": PROMPT, "answer": "1"}, {"prompt": PROMPT, "answer": ""}]
    with pytest.raises(UserError) as err:
        data.validate_rows(rows, ("prompt", "answer"), "sample.jsonl")
    assert "row 1" in str(err.value) and "'answer'" in str(err.value)
    with pytest.raises(UserError, match="chat format"):
        data.validate_rows([{"prompt": "plain text"}], ("prompt",), "x")


def test_dedupe_and_holdout():
    rows = [{"prompt": [{"role": "user", "content": str(i % 5)}]} for i in range(20)]
    kept, dropped = data.dedupe(rows)
    assert len(kept) == 5 and dropped == 15
    train, held = data.split_holdout(list(range(40)), 8, seed=1)
    assert len(held) == 8 and len(train) == 32 and not set(train) & set(held)
    assert data.split_holdout(list(range(40)), 8, seed=1) == (train, held)


def test_long_prompts_are_dropped_and_reported():
    from tiny import tiny_tokenizer

    tok = tiny_tokenizer()
    rows = [{"prompt": [{"role": "user", "content": "word " * n}]} for n in (1, 2, 200)]
    kept, stats = data.filter_long_prompts(rows, tok, limit=60)
    assert len(kept) == 2 and stats.dropped == 1 and stats.max > 60
    with pytest.raises(UserError, match="max_prompt_tokens"):
        data.filter_long_prompts(rows, tok, limit=1)
