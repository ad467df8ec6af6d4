"""The python tool: state within an episode, nothing between episodes, hostile calls answered with errors."""

from __future__ import annotations

import pytest

from grpo_fast.tools import PythonSession


@pytest.fixture()
def session() -> PythonSession:
    return PythonSession(timeout=3.0)


def test_state_persists_within_an_episode(session: PythonSession) -> None:
    assert session.python("x = 2 ** 100\nprint('set')") == "set\n"
    assert session.python("def sq(n):\n    return n * n") == "(no output)"
    assert session.python("x % 97, sq(12)") == "(16, 144)\n"  # a final expression's value is shown
    assert session.python("print('once')") == "once\n"
    assert session.python("y = 1") == "(no output)"  # earlier cells replayed quietly: 'set' and 'once' not shown


def test_nothing_is_shared_between_episodes(session: PythonSession) -> None:
    other = PythonSession()
    session.python("secret = 42\nopen('/tmp/note.txt', 'w').write('42')")
    assert "NameError" in other.python("secret")
    note = other.python("open('/tmp/note.txt').read()")  # not there (a /tmp of its own), or out of reach (Landlock)
    assert "FileNotFoundError" in note or "PermissionError" in note, note
    session.reset()
    assert "NameError" in session.python("secret")


def test_errors_come_back_as_text_and_the_session_goes_on(session: PythonSession) -> None:
    out = session.python("1 / 0")
    assert "ZeroDivisionError" in out and "runner.py" not in out  # the cell's own traceback
    assert session.python("z = 3") == "(no output)"
    assert session.python("z + 1") == "4\n"


@pytest.mark.parametrize("code,expect", [
    ("while True:\n    print('x' * 100)", "output limit"),
    ("import time\ntime.sleep(30)", "timed out"),
    ("while True:\n    pass", "timed out"),
    ("import os\nwhile True:\n    os.fork()", ""),
    ("x = bytearray(1 << 34)", "MemoryError"),
    ("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)",
     "unreachable|Operation not permitted"),  # an empty network namespace | no network socket (a container)
    ("open('/etc/passwd', 'a').write('x')", "Errno"),
    ("import os\nos.kill(1, 9)\nprint('alive')", ""),
    ("import os\nprint(sorted(os.listdir('/proc')))", ""),
])
def test_hostile_calls_harm_nothing(session: PythonSession, code: str, expect: str) -> None:
    session.python("kept = 'before'")
    out = session.python(code)
    assert any(e in out for e in expect.split("|")), out
    assert session.python("kept") == "'before'\n"  # the episode still works; the hostile cell was not kept
    assert "NameError" in PythonSession().python("kept")  # and a new episode starts clean


def test_output_is_capped_for_the_model() -> None:
    small = PythonSession(max_chars=100)
    out = small.python("print('a' * 5000)")
    assert len(out) < 200 and "more characters" in out
