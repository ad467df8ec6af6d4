"""The tool_math run of tests/tools/test_tool_math.py, as a fresh interpreter (tests/helpers/background.py): SFT
warm-up on demonstrations, GRPO steps through TRL's environment_factory loop, the held-out evaluation, then
``generate`` and ``chat`` with the trained adapter. Run in the working directory given as its argument; prints
what the test checks as one JSON line."""

from __future__ import annotations

import io
import json
import os
import sys

from grpo_fast import infer
from grpo_fast.rundir import Run
from grpo_fast.train import train


def main(workdir: str) -> dict:
    os.chdir(workdir)
    result = train("tool_math", eval_rows=8, num_generations=4,
                   per_device_train_batch_size=4, stages=[
                       {"name": "warmup", "sft": True, "max_steps": 16, "learning_rate": 1e-3},
                       {"name": "grpo", "max_steps": 2}])
    metrics = [json.loads(line) for line in (result.path / "metrics.jsonl").read_text().splitlines()]
    samples = [json.loads(line) for line in (result.path / "samples.jsonl").read_text().splitlines()]
    prompts = result.path.parent / "prompts.txt"
    prompts.write_text("What is 4837 * 2913?\nWhat is 1234 * 5678?\n")
    out_file = result.path.parent / "out.jsonl"
    records = infer.generate_file(result.path, prompts, out_file, engine="transformers", max_new_tokens=96)
    gen = infer.Generator(Run.open(result.path, lora=True), infer.select_engine("transformers"), max_new_tokens=96)
    chat = io.StringIO()
    chat_rc = infer.chat_loop(gen, ["What is 4837 * 2913?", "/exit"], chat)
    return {"metrics": metrics, "evaluation": result.evaluation, "samples": samples, "records": records,
            "written": [json.loads(line) for line in out_file.read_text().splitlines()],
            "chat_rc": chat_rc, "chat": chat.getvalue()}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
