"""A pytest file run by pytest in the judge: fixtures, classes, ``unittest.TestCase``, marks, parametrize.

The file is executed as module ``test_solution`` (so an ``if __name__ == "__main__": pytest.main()`` guard does not
run; a bare ``pytest.main()`` / ``unittest.main()`` is a no-op while it loads) in the judge's test namespace, where
``solution`` is the program's module seen through proxies. pytest then collects that module object (no file, no
import hook) and runs its items; each item's setup, call and teardown decide one verdict. pytest and its plugins
are imported once in the template (``preload``, at the first pytest job), so a job pays only for its own session;
a workload without pytest files never loads it.

Skipped items leave the count; an xfail that fails (or passes, when not strict) counts as passed, as pytest's exit
code counts it. Where two interpreters cannot give plain-Python behaviour (a file both sides should see, a patch
of the test's process meant for the program's), a failed test says so: ``outside design (<what>): <why>``.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from pathlib import Path
from typing import Any

from .wire import Deadline, Lost

MODULE = "test_solution"
ARGS = ["-q", "-s", "-c", os.devnull, "--noconftest", "--disable-plugin-autoload", "--assert=plain",
        "-p", "no:cacheprovider", "-p", "no:faulthandler",
        "-p", "no:pastebin", "-p", "no:junitxml", "-p", "no:doctest", "-p", "no:unraisableexception",
        "-p", "no:threadexception", "-p", "no:stepwise", "-p", "no:setuponly", "-p", "no:setupplan",
        "-W", "ignore::pytest.PytestWarning"]
BASETEMP = ".pytest"  # ``tmp_path`` and the like, below the working directory that the program shares
# ``-c os.devnull``: no ini file is looked for, so none a program wrote in that directory (``addopts``, ``pythonpath``)
# can reach pytest's configuration

# A failed test that uses one of these reaches only the judge's process: counted as outside the design.
OUTSIDE_FIXTURES = {
    "tmp_path": "a file shared by the test and the program", "tmpdir": "a file shared by the test and the program",
    "tmp_path_factory": "a file shared by the test and the program",
    "tmpdir_factory": "a file shared by the test and the program",
    "monkeypatch": "monkeypatch changes the test's process, not the program's",
    "caplog": "logging runs in the program's process",
}
# Names a failed test's code uses (``co_names``) that reach only the test's process.
OUTSIDE_NAMES = {
    "seed": "the test seeds random in its own process", "patch": "mock.patch changes the test's process",
    "setenv": "the test's environment is not the program's", "environ": "the test's environment is not the program's",
    "open": "a file shared by the test and the program", "write_text": "a file shared by the test and the program",
    "read_text": "a file shared by the test and the program", "NamedTemporaryFile": "a file shared by the test and "
    "the program", "mkdtemp": "a file shared by the test and the program",
    "TemporaryDirectory": "a file shared by the test and the program",
    "assertLogs": "logging runs in the program's process", "getLogger": "logging runs in the program's process",
    "GeneratorType": "a program's generator is a proxy in the test's process",
    "isgenerator": "a program's generator is a proxy in the test's process",
    "Generator": "a program's generator is a proxy in the test's process",
    "AsyncGenerator": "a program's async generator is a proxy in the test's process",
    "isasyncgen": "a program's async generator is a proxy in the test's process",
    "gather": "asyncio.gather runs the program's coroutines one at a time",
}


_loaded: list[bool] = []


def preload() -> bool:
    """Import pytest and its default plugins and run one session on a built-in file, once: done in the template
    (the forker, at its first pytest job), so no job pays for it. True when it was done by this call."""
    if _loaded:
        return False
    _loaded.append(True)
    try:
        import pytest  # noqa: F401, PLC0415 - pytest: loaded at the first pytest job
        from _pytest.config import default_plugins  # noqa: PLC0415 - as above

        for name in default_plugins:
            importlib.import_module(f"_pytest.{name}")
    except ImportError:
        return False
    _memory_tempfiles()
    _warm_up()
    _prepare_session()
    return True


_prepared: list[tuple[Any, Verdicts]] = []  # a session's configuration, made in the template for the next job


def _prepare_session() -> None:
    """pytest's configuration (plugins registered, options parsed) made once in the template: a job's judge, a
    fresh fork, only configures it and runs its session (``run``). It holds no job: the plugin is filled in there."""
    from _pytest.config import _prepareconfig  # noqa: PLC0415 - pytest: loaded at the first pytest job

    plugin = Verdicts(None, None, None)
    _prepared.append((_prepareconfig(list(ARGS), [plugin]), plugin))


class _Idle:
    rule = dead = ""


WARM_UP = """
import pytest
@pytest.fixture
def one():
    return 1
@pytest.mark.parametrize("x", [1, 2])
def test_a(one, x, capsys):
    print(x)
    assert capsys.readouterr().out and one
class TestB:
    def test_b(self):
        with pytest.raises(ValueError):
            int("x")
"""


def _warm_up() -> None:
    """One session on a built-in file, so every job's judge inherits pytest's code paths already run once
    (CPython specialises code as it runs it; done in each fresh process, a session costs several times more)."""
    namespace = {"__builtins__": __builtins__}
    saved = sys.stdout, sys.stderr
    with open(os.devnull, "w") as quiet:  # the zygote's stdout is its channel to the trainer
        sys.stdout = sys.stderr = quiet
        try:
            run(compile(WARM_UP, "<warm-up>", "exec"), namespace, _Idle(), repr)
        finally:
            sys.stdout, sys.stderr = saved
            sys.modules.pop(MODULE, None)


def _memory_tempfiles() -> None:
    """``capfd`` buffers in a temporary file; the judge can write no file, so its buffer is a memory file."""
    import _pytest.capture  # noqa: PLC0415 - pytest: loaded at the first pytest job

    def memory_file(buffering: int = -1, **_: Any) -> Any:
        return open(os.memfd_create("capture"), "wb+", buffering=buffering)  # noqa: SIM115

    _pytest.capture.TemporaryFile = memory_file


def _no_main(*args: Any, **kwargs: Any) -> int:
    return 0


def load(code: types.CodeType, namespace: dict[str, Any]) -> types.ModuleType:
    """Run the file's code in ``namespace`` as module ``test_solution``; the module pytest collects.

    ``pytest.main()``, ``unittest.main()`` and ``sys.exit()`` at the file's top level end nothing."""
    import unittest  # noqa: PLC0415 - only for a pytest job

    import pytest  # noqa: PLC0415 - pytest: loaded at the first pytest job

    module = types.ModuleType(MODULE)
    module.__file__ = os.path.join(os.getcwd(), f"{MODULE}.py")
    namespace.update({"__name__": MODULE, "__file__": module.__file__})
    saved = pytest.main, unittest.main
    pytest.main = unittest.main = _no_main  # type: ignore[assignment]
    try:
        exec(code, namespace)  # noqa: S102 - the dataset's test file
    except SystemExit:
        pass
    finally:
        pytest.main, unittest.main = saved
    for value in list(namespace.values()):  # the test's own classes and functions, as in the assert format:
        if isinstance(value, (type, types.FunctionType)) and getattr(value, "__module__", None) == MODULE:
            value.__module__ = "__main__"  # lent to the program as the test's, never looked up by name there
    module.__dict__.update(namespace.items())
    namespace["__name__"] = "__main__"  # what the tests define as they run (a lambda) is the test's, as above
    return module


class Verdicts:
    """The pytest plugin: collects the given module, keeps one verdict per item."""

    def __init__(self, module: types.ModuleType, conn: Any, describe: Any) -> None:
        self.module, self.conn, self.describe = module, conn, describe
        self.order: list[str] = []  # every collected item, in order: one that never finished is failed
        self.state: dict[str, list[Any]] = {}  # nodeid -> [outcome ("pending"|"pass"|"fail"|"skip"), why]
        self.items: dict[str, Any] = {}
        self.error = ""

    def pytest_collection(self, session: Any) -> bool:
        from _pytest.python import Module  # noqa: PLC0415 - pytest: loaded at the first pytest job

        node = Module.from_parent(session, path=Path(self.module.__file__))
        module = self.module
        node._getobj = lambda: module  # no import: the module is already loaded; its marks are read as usual
        session.items = list(session.genitems(node))
        session.testscollected = len(session.items)
        self.order = [item.nodeid for item in session.items]
        return True

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed and not self.error:
            self.error = _last_line(report.longreprtext)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.conn.rule = ""
        self.state[nodeid] = ["pending", ""]  # a pass only once its call is reported passed

    def pytest_runtest_setup(self, item: Any) -> None:
        if hasattr(self.conn, "files"):  # a test that uses files: the two working directories kept in step
            self.conn.files = _uses_files(item)
            self.conn.logs = _reads_logs(item)
            code = getattr(getattr(item, "function", None), "__code__", None)
            self.conn.steps = code is not None and not {"send", "throw"}.isdisjoint(code_names(code, set()))

    def pytest_runtest_makereport(self, item: Any, call: Any) -> None:
        self.items[item.nodeid] = item
        self.excinfo = call.excinfo

    def pytest_runtest_logreport(self, report: Any) -> None:
        state = self.state.setdefault(report.nodeid, ["pending", ""])
        if state[0] == "fail":
            return
        xfail = hasattr(report, "wasxfail")  # an xfail that failed, or passed when not strict: pytest's pass
        if report.failed:
            exc = getattr(self, "excinfo", None)
            why = "timeout" if exc is not None and exc.errisinstance(Deadline) else (
                self.describe(exc.value) if exc is not None else _last_line(report.longreprtext))
            state[:] = ["fail", (f"{report.when}: " if report.when != "call" else "") + why]
        elif report.skipped and not xfail and state[0] == "pending":
            state[:] = ["skip", ""]
        elif report.when == "call" and state[0] == "pending" and (report.passed or xfail):
            state[:] = ["pass", ""]

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        state = self.state[nodeid]
        if self.conn.dead and state[0] == "pass":  # the program died or hung inside this test: never a pass
            state[:] = ["fail", self.conn.dead]
        if state[0] == "pending":
            state[:] = ["fail", "no result reported"]
        if state[0] == "fail":
            shared = getattr(self.conn, "files_shared", False)  # files reach both sides
            why = self.conn.rule or _outside(self.items.get(nodeid), shared) or (
                "a program object is a proxy in the test's process" if "Remote" in state[1] else "")
            if why and not state[1].startswith("outside design"):
                state[1] = f"outside design ({why}): {state[1]}"

    def verdict(self) -> tuple[list[bool], list[str]]:
        """One verdict per collected item: one that never started or finished (a session cut short by the
        program's ``KeyboardInterrupt``, the deadline's alarm while pytest reported) is failed, never passed."""
        states = [self.state.get(n, ["fail", "not run: the session stopped"]) for n in self.order]
        kept = [["fail", "the session stopped inside it"] if s[0] == "pending" else s for s in states
                if s[0] != "skip"]
        return [s[0] == "pass" for s in kept], [s[1][:300] for s in kept]


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "error"


def code_names(code: Any, seen: set[str]) -> set[str]:
    """Every name a code object and the code nested in it use (``co_names``)."""
    seen.update(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            code_names(const, seen)
    return seen


FILE_FIXTURES = frozenset({"tmp_path", "tmpdir", "tmp_path_factory", "tmpdir_factory"})
FILE_NAMES = frozenset({"open", "write_text", "read_text", "write_bytes", "read_bytes", "exists", "unlink",
                        "remove", "listdir", "mkdir", "makedirs", "NamedTemporaryFile", "TemporaryDirectory",
                        "mkdtemp", "mkstemp", "isfile", "getsize", "touch", "iterdir", "glob", "rmtree"})


def _reads_logs(item: Any) -> bool:
    if "caplog" in getattr(item, "fixturenames", ()):
        return True
    code = getattr(getattr(item, "function", None), "__code__", None)
    return code is not None and not {"assertLogs", "assertNoLogs"}.isdisjoint(code_names(code, set()))


def _uses_files(item: Any) -> bool:
    if FILE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    code = getattr(getattr(item, "function", None), "__code__", None)
    return code is not None and not FILE_NAMES.isdisjoint(code_names(code, set()))


def _outside(item: Any, shared_files: bool) -> str:
    """Why a failed item may be outside the design: a fixture or a name that reaches only the test's process."""
    if item is None:
        return ""
    for name in getattr(item, "fixturenames", ()):
        if name in OUTSIDE_FIXTURES and not (shared_files and name in FILE_FIXTURES):
            return OUTSIDE_FIXTURES[name]
    fn = getattr(item, "function", None)
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    names = code_names(code, set())
    return next((OUTSIDE_NAMES[n] for n in sorted(names) if n in OUTSIDE_NAMES
                 and not (shared_files and n in FILE_NAMES)), "")


def run(code: types.CodeType, namespace: dict[str, Any], conn: Any, describe: Any) -> dict[str, Any]:
    """Load and run the file; ``passed``/``failures`` per test (skipped ones left out), ``error`` when none ran."""
    import pytest  # noqa: PLC0415 - pytest: loaded at the first pytest job

    basetemp = os.path.join(os.getcwd(), BASETEMP)  # the job's working directory, before the file can move it
    try:
        module = load(code, namespace)
    except (Deadline, Lost):
        raise
    except ImportError as err:
        if err.name and err.name.split(".")[0] not in ("solution", "pytest"):  # the file needs a module we lack
            return {"passed": [], "failures": [], "error": f"the test file needs module {err.name!r}: not installed"}
        return {"passed": [False], "failures": [f"the test file failed to load: {describe(err)}"], "error": ""}
    except BaseException as err:  # noqa: BLE001 - e.g. a top-level call into the program that raised
        return {"passed": [False], "failures": [f"the test file failed to load: {describe(err)}"], "error": ""}
    saved = sys.stdout, sys.stderr
    try:
        if _prepared:  # the template's configuration: this process is a fresh fork, it is used once
            config, plugin = _prepared.pop()
            plugin.module, plugin.conn, plugin.describe = module, conn, describe
            config.option.basetemp = basetemp
            try:
                config.hook.pytest_cmdline_main(config=config)
            finally:
                config._ensure_unconfigure()  # noqa: SLF001 - what pytest.main does after its session
        else:
            plugin = Verdicts(module, conn, describe)
            pytest.main([*ARGS, "--basetemp", basetemp], plugins=[plugin])
    finally:
        sys.stdout, sys.stderr = saved
    passed, failures = plugin.verdict()
    if not plugin.order:
        return {"passed": [], "failures": [], "error": plugin.error and f"the test file failed to collect: "
                f"{plugin.error}" or "no test collected in the test file"}
    if not passed:
        return {"passed": [], "failures": [], "error": "every test in the test file was skipped"}
    return {"passed": passed, "failures": failures, "error": ""}
