"""The Python API a notebook user finds: `import grpo_fast` is cheap and lists the pipeline; the README's
example runs exactly as written."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import background
import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_is_cheap_and_lists_the_api():
    code = ("import sys, grpo_fast; print(sorted(grpo_fast.__all__)); "
            "print(any(m in sys.modules for m in ('torch', 'trl', 'transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert "'evaluate', 'export', 'health', 'load'" in out and "'train'" in out and out.strip().endswith("False")


def test_pipeline_modules_are_callable_under_their_names():
    import grpo_fast
    from grpo_fast.evaluate import evaluate_run
    from grpo_fast.export import export_run
    from grpo_fast.train import train
    from grpo_fast.watch.health import health

    assert callable(grpo_fast.train) and inspect.signature(grpo_fast.train) == inspect.signature(train)
    assert inspect.signature(grpo_fast.evaluate) == inspect.signature(evaluate_run)
    assert "format" in inspect.signature(grpo_fast.export).parameters and callable(export_run)
    assert inspect.signature(grpo_fast.health) == inspect.signature(health)
    assert grpo_fast.train.__doc__ and "grpo_fast.train(" in train.__doc__
    assert set(grpo_fast.__all__) <= set(dir(grpo_fast))


def test_bad_input_raises_user_error_with_a_fix(tiny_model_dir, in_tmp):
    import pytest

    import grpo_fast

    with pytest.raises(grpo_fast.UserError) as info:
        grpo_fast.train("demo", model=str(tiny_model_dir), learning_rat=0.1)
    assert "did you mean 'learning_rate'" in str(info.value)
    with pytest.raises(grpo_fast.UserError, match="not a grpo_fast run directory"):
        grpo_fast.load(in_tmp)


def readme_example() -> subprocess.CompletedProcess:
    """The README's Python example as a file, run by a fresh interpreter in a folder of its own."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    folder = Path(tempfile.mkdtemp(prefix="readme-example-"))
    (folder / "example.py").write_text(code, encoding="utf-8")
    return subprocess.run([sys.executable, "example.py"], capture_output=True, text=True, cwd=folder, timeout=1200)


# started when the suite is collected (tests/helpers/background.py)
BACKGROUND = {"test_readme_python_example_runs_as_written": readme_example}


@pytest.mark.slow
def test_readme_python_example_runs_as_written():
    proc = background.result("test_readme_python_example_runs_as_written")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "held-out (8 rows, base -> trained): accuracy" in proc.stdout and "'metric': 'accuracy'" in proc.stdout
    assert "Warning" not in proc.stderr, proc.stderr[-2000:]  # as quiet as the CLI
