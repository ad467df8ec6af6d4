"""Pytest files as generated suites write them, with honest and wrong programs (issue 29's families).

``HONEST``: name -> (family, solution, test file): each must earn the full code reward.
``OUTSIDE``: name -> (why, solution, test file): correct programs the two-process design cannot give plain-Python
behaviour; they must score below 1.0 *and* be reported as outside the design.
``WRONG``: name -> (solution, test file): wrong programs, each must score below 1.0.
"""

from __future__ import annotations

from textwrap import dedent


def S(text: str) -> str:  # noqa: N802 - a source literal
    return dedent(text).strip("\n") + "\n"


ADD = S("""
    def add(a, b):
        return a + b
    """)
STACK = S("""
    class Stack:
        def __init__(self):
            self.items = []
        def push(self, x):
            self.items.append(x)
        def pop(self):
            if not self.items:
                raise IndexError("pop from empty stack")
            return self.items.pop()
        def peek(self):
            return self.items[-1]
        def __len__(self):
            return len(self.items)
        def is_empty(self):
            return not self.items
    """)
GREET = S("""
    import sys

    def greet(name):
        print(f"Hello, {name}!")

    def warn(msg):
        print(f"warning: {msg}", file=sys.stderr)

    def table(n):
        for i in range(1, n + 1):
            print(i, i * i)
    """)
BANK = S("""
    class InsufficientFunds(Exception):
        def __init__(self, needed, available):
            super().__init__(f"need {needed}, have {available}")
            self.needed = needed
            self.available = available

    class Account:
        def __init__(self, balance=0):
            if balance < 0:
                raise ValueError("negative balance")
            self.balance = balance
            self.history = []
        def deposit(self, x):
            if x <= 0:
                raise ValueError("deposit must be positive")
            self.balance += x
            self.history.append(("deposit", x))
        def withdraw(self, x):
            if x > self.balance:
                raise InsufficientFunds(x, self.balance)
            self.balance -= x
            self.history.append(("withdraw", x))
            return self.balance
    """)
GEN = S("""
    def count_up(n):
        i = 0
        while i < n:
            yield i
            i += 1

    def fib():
        a, b = 0, 1
        while True:
            yield a
            a, b = b, a + b

    def chunks(xs, k):
        for i in range(0, len(xs), k):
            yield xs[i:i + k]
    """)
BUILTIN_NAMED = S("""
    def sorted(xs):
        '''Insertion sort, ascending.'''
        out = []
        for x in xs:
            i = 0
            while i < len(out) and out[i] <= x:
                i += 1
            out.insert(i, x)
        return out

    def max(xs):
        best = xs[0]
        for x in xs[1:]:
            if x > best:
                best = x
        return best

    def sum(xs):
        total = 0
        for x in xs:
            total += x
        return total
    """)
HISTORY = S("""
    history = []
    registry = {}
    counter = 0

    def record(x):
        global counter
        history.append(x)
        registry[x] = len(history)
        counter += 1
        return len(history)
    """)

HONEST: dict[str, tuple[str, str, str]] = {}
OUTSIDE: dict[str, tuple[str, str, str]] = {}
WRONG: dict[str, tuple[str, str]] = {}


def honest(name: str, family: str, solution: str, tests: str) -> None:
    HONEST[name] = (family, solution, S(tests))


def outside(name: str, why: str, family: str, solution: str, tests: str) -> None:
    OUTSIDE[name] = (why, solution, S(tests))


# -- fixtures defined in the file
honest("fixture_value", "file fixtures", ADD, """
    import pytest
    from solution import add

    @pytest.fixture
    def pair():
        return (2, 3)

    def test_add(pair):
        assert add(*pair) == 5
    """)
honest("fixture_object", "file fixtures", STACK, """
    import pytest
    from solution import Stack

    @pytest.fixture
    def stack():
        s = Stack()
        s.push(1)
        s.push(2)
        return s

    def test_pop(stack):
        assert stack.pop() == 2
        assert len(stack) == 1

    def test_peek(stack):
        assert stack.peek() == 2
    """)
honest("fixture_yield_teardown", "file fixtures", STACK, """
    import pytest
    from solution import Stack

    log = []

    @pytest.fixture
    def stack():
        s = Stack()
        yield s
        log.append(len(s))

    def test_push(stack):
        stack.push(5)
        assert not stack.is_empty()

    def test_teardown_ran():
        assert log == [1]
    """)
honest("fixture_using_fixture", "file fixtures", ADD, """
    import pytest
    from solution import add

    @pytest.fixture
    def base():
        return 10

    @pytest.fixture
    def total(base):
        return add(base, 5)

    def test_total(total):
        assert total == 15
    """)
honest("fixture_module_scope", "file fixtures", STACK, """
    import pytest
    from solution import Stack

    @pytest.fixture(scope="module")
    def shared():
        return Stack()

    def test_first(shared):
        shared.push(1)
        assert len(shared) == 1

    def test_second(shared):
        shared.push(2)
        assert len(shared) == 2
    """)
honest("fixture_autouse", "file fixtures", HISTORY, """
    import pytest
    import solution

    seen = []

    @pytest.fixture(autouse=True)
    def note():
        seen.append(solution.counter)

    def test_record():
        assert solution.record("a") == 1
        assert seen == [0]
    """)
honest("fixture_params", "file fixtures", ADD, """
    import pytest
    from solution import add

    @pytest.fixture(params=[1, 2, 3])
    def n(request):
        return request.param

    def test_double(n):
        assert add(n, n) == 2 * n
    """)
honest("fixture_conftest_style_factory", "file fixtures", BANK, """
    import pytest
    from solution import Account

    @pytest.fixture
    def make_account():
        def make(balance=0):
            return Account(balance)
        return make

    def test_factory(make_account):
        a = make_account(50)
        a.deposit(25)
        assert a.balance == 75
    """)

# -- pytest's own fixtures
honest("capsys_out", "builtin fixtures", GREET, """
    from solution import greet

    def test_greet(capsys):
        greet("Ada")
        captured = capsys.readouterr()
        assert captured.out == "Hello, Ada!\\n"
    """)
honest("capsys_err", "builtin fixtures", GREET, """
    from solution import warn

    def test_warn(capsys):
        warn("low disk")
        assert capsys.readouterr().err == "warning: low disk\\n"
    """)
honest("capsys_many_lines", "builtin fixtures", GREET, """
    from solution import table

    def test_table(capsys):
        table(3)
        out = capsys.readouterr().out
        assert out.splitlines() == ["1 1", "2 4", "3 9"]
    """)
honest("capsys_twice", "builtin fixtures", GREET, """
    from solution import greet

    def test_twice(capsys):
        greet("A")
        assert capsys.readouterr().out == "Hello, A!\\n"
        greet("B")
        assert capsys.readouterr().out == "Hello, B!\\n"
    """)
honest("capfd_out", "builtin fixtures", GREET, """
    from solution import greet

    def test_greet(capfd):
        greet("Bo")
        out, err = capfd.readouterr()
        assert out == "Hello, Bo!\\n" and err == ""
    """)
honest("capsys_disabled_then_read", "builtin fixtures", GREET, """
    from solution import greet

    def test_read(capsys):
        greet("Cy")
        assert "Cy" in capsys.readouterr().out
    """)
honest("request_node_name", "builtin fixtures", ADD, """
    from solution import add

    def test_named(request):
        assert request.node.name == "test_named"
        assert add(1, 1) == 2
    """)
honest("recwarn_program_warning", "builtin fixtures", S("""
    import warnings

    def old(x):
        warnings.warn("old is deprecated", DeprecationWarning)
        return x
    """), """
    import pytest
    from solution import old

    def test_warns():
        with pytest.warns(DeprecationWarning, match="deprecated"):
            assert old(3) == 3
    """)
honest("monkeypatch_test_side", "builtin fixtures", ADD, """
    import os
    from solution import add

    def test_env(monkeypatch):
        monkeypatch.setenv("GRPO_X", "1")
        assert os.environ["GRPO_X"] == "1"
        assert add(1, 2) == 3
    """)

# -- classes
honest("class_only", "classes", STACK, """
    from solution import Stack

    class TestStack:
        def test_push_pop(self):
            s = Stack()
            s.push(1)
            assert s.pop() == 1

        def test_empty(self):
            assert Stack().is_empty()
    """)
honest("class_setup_method", "classes", STACK, """
    from solution import Stack

    class TestStack:
        def setup_method(self):
            self.s = Stack()
            self.s.push(3)

        def test_peek(self):
            assert self.s.peek() == 3

        def test_len(self):
            assert len(self.s) == 1
    """)
honest("class_setup_class", "classes", ADD, """
    from solution import add

    class TestAdd:
        @classmethod
        def setup_class(cls):
            cls.values = [(1, 2, 3), (5, 5, 10)]

        def test_values(self):
            for a, b, c in self.values:
                assert add(a, b) == c
    """)
honest("class_with_fixture", "classes", BANK, """
    import pytest
    from solution import Account

    class TestAccount:
        @pytest.fixture
        def acct(self):
            return Account(100)

        def test_withdraw(self, acct):
            assert acct.withdraw(30) == 70

        def test_deposit(self, acct):
            acct.deposit(1)
            assert acct.balance == 101
    """)
honest("class_parametrized_method", "classes", ADD, """
    import pytest
    from solution import add

    class TestAdd:
        @pytest.mark.parametrize("a,b,c", [(1, 1, 2), (2, 3, 5)])
        def test_add(self, a, b, c):
            assert add(a, b) == c
    """)
honest("class_nested_helper", "classes", ADD, """
    from solution import add

    class Helper:
        def twice(self, x):
            return add(x, x)

    class TestTwice:
        def test_twice(self):
            assert Helper().twice(4) == 8
    """)
honest("xunit_module_setup", "classes", HISTORY, """
    import solution

    def setup_module(module):
        solution.record("setup")

    def test_after_setup():
        assert solution.counter == 1
    """)
honest("xunit_function_setup", "classes", STACK, """
    from solution import Stack

    s = None

    def setup_function(function):
        global s
        s = Stack()

    def test_a():
        s.push(1)
        assert len(s) == 1

    def test_b():
        assert len(s) == 0
    """)

# -- unittest
honest("unittest_case", "unittest", ADD, """
    import unittest
    from solution import add

    class TestAdd(unittest.TestCase):
        def test_add(self):
            self.assertEqual(add(2, 2), 4)

        def test_neg(self):
            self.assertEqual(add(-1, 1), 0)
    """)
honest("unittest_setup", "unittest", STACK, """
    import unittest
    from solution import Stack

    class TestStack(unittest.TestCase):
        def setUp(self):
            self.s = Stack()

        def test_raises(self):
            with self.assertRaises(IndexError):
                self.s.pop()

        def test_push(self):
            self.s.push(1)
            self.assertFalse(self.s.is_empty())
    """)
honest("unittest_main_guard", "unittest", ADD, """
    import unittest
    from solution import add

    class T(unittest.TestCase):
        def test_it(self):
            self.assertEqual(add(1, 2), 3)

    if __name__ == "__main__":
        unittest.main()
    """)
honest("unittest_bare_main", "unittest", ADD, """
    import unittest
    from solution import add

    class T(unittest.TestCase):
        def test_it(self):
            self.assertEqual(add(1, 2), 3)

    unittest.main()
    """)
honest("unittest_subtest", "unittest", ADD, """
    import unittest
    from solution import add

    class T(unittest.TestCase):
        def test_many(self):
            for a in range(3):
                with self.subTest(a=a):
                    self.assertEqual(add(a, 0), a)
    """)
honest("unittest_almost_equal", "unittest", S("""
    def mean(xs):
        return sum(xs) / len(xs)
    """), """
    import unittest
    from solution import mean

    class T(unittest.TestCase):
        def test_mean(self):
            self.assertAlmostEqual(mean([0.1, 0.2]), 0.15)
            self.assertIn(mean([1, 2, 3]), [2.0])
    """)
honest("unittest_setupclass", "unittest", BANK, """
    import unittest
    from solution import Account, InsufficientFunds

    class T(unittest.TestCase):
        @classmethod
        def setUpClass(cls):
            cls.start = 10

        def test_overdraw(self):
            with self.assertRaises(InsufficientFunds):
                Account(self.start).withdraw(11)
    """)

# -- marks
honest("skip_mark", "marks", ADD, """
    import pytest
    from solution import add

    @pytest.mark.skip(reason="not ready")
    def test_future():
        assert add(1, 1) == 3

    def test_now():
        assert add(1, 1) == 2
    """)
honest("skipif_mark", "marks", ADD, """
    import sys
    import pytest
    from solution import add

    @pytest.mark.skipif(sys.version_info < (3, 0), reason="py3")
    def test_add():
        assert add(2, 2) == 4

    @pytest.mark.skipif(True, reason="always")
    def test_never():
        assert False
    """)
honest("xfail_mark", "marks", ADD, """
    import pytest
    from solution import add

    @pytest.mark.xfail(reason="strings are not numbers")
    def test_strings():
        assert add("1", 2) == 3

    def test_ok():
        assert add(1, 2) == 3
    """)
honest("skip_inside_test", "marks", ADD, """
    import pytest
    from solution import add

    def test_maybe():
        pytest.skip("skipped at run time")

    def test_ok():
        assert add(0, 0) == 0
    """)
honest("importorskip", "marks", ADD, """
    import pytest
    from solution import add

    def test_missing_module():
        pytest.importorskip("no_such_module_here")

    def test_ok():
        assert add(2, 0) == 2
    """)
honest("custom_mark", "marks", ADD, """
    import pytest
    from solution import add

    @pytest.mark.slow
    def test_slow():
        assert add(10, 10) == 20
    """)
honest("xfail_raises", "marks", STACK, """
    import pytest
    from solution import Stack

    @pytest.mark.xfail(raises=IndexError)
    def test_empty_pop():
        Stack().pop()
    """)

# -- parametrize
honest("parametrize_stack", "parametrize", ADD, """
    import pytest
    from solution import add

    @pytest.mark.parametrize("a", [1, 2])
    @pytest.mark.parametrize("b", [3, 4])
    def test_add(a, b):
        assert add(a, b) == a + b
    """)
honest("parametrize_with_fixture", "parametrize", ADD, """
    import pytest
    from solution import add

    @pytest.fixture
    def offset():
        return 100

    @pytest.mark.parametrize("x", [1, 2, 3])
    def test_offset(offset, x):
        assert add(offset, x) == 100 + x
    """)
honest("parametrize_ids", "parametrize", ADD, """
    import pytest
    from solution import add

    @pytest.mark.parametrize("a,b,expected", [(1, 2, 3), (0, 0, 0)], ids=["small", "zero"])
    def test_add(a, b, expected):
        assert add(a, b) == expected
    """)
honest("parametrize_param_marks", "parametrize", ADD, """
    import pytest
    from solution import add

    @pytest.mark.parametrize("a,b,expected", [
        (1, 2, 3),
        pytest.param(1, "x", None, marks=pytest.mark.xfail(raises=TypeError)),
        pytest.param(5, 5, 11, marks=pytest.mark.skip),
    ])
    def test_add(a, b, expected):
        assert add(a, b) == expected
    """)
honest("parametrize_list_names", "parametrize", ADD, """
    import pytest
    from solution import add

    @pytest.mark.parametrize(["a", "b"], [(1, 2), (3, 4)])
    def test_add(a, b):
        assert add(a, b) == add(b, a)
    """)
honest("parametrize_single_name", "parametrize", S("""
    def is_even(n):
        return n % 2 == 0
    """), """
    import pytest
    from solution import is_even

    @pytest.mark.parametrize("n", [0, 2, 4, 100])
    def test_even(n):
        assert is_even(n)

    @pytest.mark.parametrize("n", [1, 3])
    def test_odd(n):
        assert not is_even(n)
    """)
honest("parametrize_module_level", "parametrize", ADD, """
    import pytest
    from solution import add

    pytestmark = pytest.mark.parametrize("n", [1, 2])

    def test_a(n):
        assert add(n, 0) == n

    def test_b(n):
        assert add(0, n) == n
    """)
honest("parametrize_class", "parametrize", ADD, """
    import pytest
    from solution import add

    @pytest.mark.parametrize("n", [5, 6])
    class TestAdd:
        def test_a(self, n):
            assert add(n, 1) == n + 1
    """)
honest("parametrize_indirect", "parametrize", STACK, """
    import pytest
    from solution import Stack

    @pytest.fixture
    def stack(request):
        s = Stack()
        for x in request.param:
            s.push(x)
        return s

    @pytest.mark.parametrize("stack", [[1], [1, 2, 3]], indirect=True)
    def test_top(stack):
        assert stack.peek() == len(stack)
    """)

# -- guards
honest("pytest_main_guard", "guards", ADD, """
    import pytest
    from solution import add

    def test_add():
        assert add(1, 2) == 3

    if __name__ == "__main__":
        pytest.main([__file__])

    def test_after_guard():
        assert add(2, 2) == 4
    """)
honest("bare_pytest_main", "guards", ADD, """
    import pytest
    from solution import add

    def test_add():
        assert add(1, 2) == 3

    pytest.main(["-v"])
    """)
honest("sys_exit_pytest_main", "guards", ADD, """
    import sys
    import pytest
    from solution import add

    def test_add():
        assert add(1, 2) == 3

    if __name__ == "__main__":
        sys.exit(pytest.main([__file__]))
    """)
honest("guard_prints", "guards", ADD, """
    from solution import add

    def test_add():
        assert add(4, 4) == 8

    if __name__ == "__main__":
        test_add()
        print("all passed")
    """)

# -- star imports, builtin names
honest("star_import", "star imports", ADD + GREET, """
    from solution import *

    def test_add():
        assert add(1, 2) == 3

    def test_greet(capsys):
        greet("Z")
        assert capsys.readouterr().out == "Hello, Z!\\n"
    """)
honest("star_builtin_sorted", "star imports", BUILTIN_NAMED, """
    from solution import *

    def test_sorted():
        assert sorted([3, 1, 2]) == [1, 2, 3]
    """)
honest("star_builtin_max_sum", "star imports", BUILTIN_NAMED, """
    from solution import *

    def test_max():
        assert max([1, 9, 3]) == 9

    def test_sum():
        assert sum([1, 2, 3]) == 6
    """)
honest("named_builtin_import", "star imports", BUILTIN_NAMED, """
    from solution import sorted

    def test_sorted():
        assert sorted([2, 1]) == [1, 2]
    """)
honest("star_with_all", "star imports", S("""
    __all__ = ["area"]

    def area(r):
        return 3 * r * r

    def _helper():
        return 0
    """), """
    from solution import *

    def test_area():
        assert area(2) == 12
    """)
honest("import_module_attr", "star imports", ADD, """
    import solution

    def test_add():
        assert solution.add(3, 4) == 7
    """)
honest("import_as_alias", "star imports", ADD, """
    import solution as sol
    from solution import add as plus

    def test_add():
        assert sol.add(1, 1) == plus(1, 1) == 2
    """)

# -- module globals
honest("global_list_live", "globals", HISTORY, """
    from solution import history, record

    def test_history():
        record(1)
        record(2)
        assert history == [1, 2]
    """)
honest("global_dict_live", "globals", HISTORY, """
    from solution import record, registry

    def test_registry():
        record("x")
        assert registry["x"] == 1
        assert "x" in registry
    """)
honest("global_counter_module", "globals", HISTORY, """
    import solution

    def test_counter():
        solution.record(1)
        solution.record(2)
        assert solution.counter == 2
    """)
honest("global_len_after_calls", "globals", HISTORY, """
    from solution import history, record

    def test_len():
        for i in range(5):
            record(i)
        assert len(history) == 5 and history[-1] == 4
    """)
honest("global_constant", "globals", S("""
    PRIMES = [2, 3, 5, 7]
    LIMITS = {"low": 1, "high": 9}

    def nth_prime(i):
        return PRIMES[i]
    """), """
    from solution import LIMITS, PRIMES, nth_prime

    def test_consts():
        assert PRIMES == [2, 3, 5, 7]
        assert nth_prime(2) == 5
        assert LIMITS["high"] == 9
    """)

# -- exceptions
honest("raises_match", "exceptions", STACK, """
    import pytest
    from solution import Stack

    def test_empty():
        with pytest.raises(IndexError, match="empty"):
            Stack().pop()
    """)
honest("raises_custom_attrs", "exceptions", BANK, """
    import pytest
    from solution import Account, InsufficientFunds

    def test_overdraw():
        with pytest.raises(InsufficientFunds) as excinfo:
            Account(10).withdraw(25)
        assert excinfo.value.needed == 25
        assert excinfo.value.available == 10
        assert "need 25" in str(excinfo.value)
    """)
honest("raises_value_error", "exceptions", BANK, """
    import pytest
    from solution import Account

    def test_negative():
        with pytest.raises(ValueError):
            Account(-1)

    def test_bad_deposit():
        a = Account()
        with pytest.raises(ValueError, match="positive"):
            a.deposit(0)
    """)
honest("custom_exception_is_exception", "exceptions", BANK, """
    from solution import Account, InsufficientFunds

    def test_catch_base():
        try:
            Account(0).withdraw(1)
        except Exception as e:
            assert isinstance(e, InsufficientFunds)
            assert e.args == ("need 1, have 0",)
        else:
            raise AssertionError("no exception")
    """)
honest("raises_type_error_call", "exceptions", ADD, """
    import pytest
    from solution import add

    def test_arity():
        with pytest.raises(TypeError):
            add(1)
    """)
honest("exception_chain_state", "exceptions", BANK, """
    import pytest
    from solution import Account, InsufficientFunds

    def test_state_kept():
        a = Account(5)
        with pytest.raises(InsufficientFunds):
            a.withdraw(6)
        assert a.balance == 5 and a.history == []
    """)

# -- generators
honest("generator_list", "generators", GEN, """
    from solution import count_up

    def test_list():
        assert list(count_up(4)) == [0, 1, 2, 3]
    """)
honest("generator_next_resume", "generators", GEN, """
    from solution import count_up

    def test_resume():
        g = count_up(5)
        assert next(g) == 0
        assert next(g) == 1
        assert list(g) == [2, 3, 4]
    """)
honest("generator_islice", "generators", GEN, """
    import itertools
    from solution import fib

    def test_fib():
        assert list(itertools.islice(fib(), 8)) == [0, 1, 1, 2, 3, 5, 8, 13]
    """)
honest("generator_partial_then_slice", "generators", GEN, """
    import itertools
    from solution import fib

    def test_partial():
        g = fib()
        first = [next(g) for _ in range(3)]
        rest = list(itertools.islice(g, 3))
        assert first == [0, 1, 1] and rest == [2, 3, 5]
    """)
honest("generator_stop", "generators", GEN, """
    import pytest
    from solution import count_up

    def test_stop():
        g = count_up(1)
        next(g)
        with pytest.raises(StopIteration):
            next(g)
    """)
honest("generator_chunks", "generators", GEN, """
    from solution import chunks

    def test_chunks():
        assert list(chunks([1, 2, 3, 4, 5], 2)) == [[1, 2], [3, 4], [5]]
    """)
honest("generator_type", "generators", GEN, """
    import types
    import inspect
    from solution import count_up

    def test_is_generator():
        g = count_up(3)
        assert inspect.isgenerator(g) or isinstance(g, types.GeneratorType)
        assert sum(g) == 3
    """)
honest("generator_zip", "generators", GEN, """
    from solution import count_up, fib

    def test_zip():
        assert list(zip(count_up(3), fib())) == [(0, 0), (1, 1), (2, 1)]
    """)

# -- objects
honest("object_state", "objects", BANK, """
    from solution import Account

    def test_history():
        a = Account(10)
        a.deposit(5)
        a.withdraw(3)
        assert a.history == [("deposit", 5), ("withdraw", 3)]
        assert a.balance == 12
    """)
honest("dataclass_equality", "objects", S("""
    from dataclasses import dataclass

    @dataclass
    class Point:
        x: int
        y: int

        def moved(self, dx, dy):
            return Point(self.x + dx, self.y + dy)
    """), """
    from solution import Point

    def test_moved():
        assert Point(1, 2).moved(1, 1) == Point(2, 3)
        assert Point(0, 0).x == 0
    """)
honest("context_manager", "objects", S("""
    class Timer:
        def __enter__(self):
            self.entered = True
            return self
        def __exit__(self, *exc):
            self.done = True
            return False
    """), """
    from solution import Timer

    def test_timer():
        with Timer() as t:
            assert t.entered
        assert t.done
    """)
honest("args_changed_after_call", "objects", S("""
    def snapshot(xs):
        return list(xs)
    """), """
    from solution import snapshot

    def test_copy():
        a = [1, 2]
        s = snapshot(a)
        a.append(3)
        assert s == [1, 2]
    """)
honest("approx_float", "objects", S("""
    def mean(xs):
        return sum(xs) / len(xs)
    """), """
    import pytest
    from solution import mean

    def test_mean():
        assert mean([0.1, 0.2, 0.3]) == pytest.approx(0.2)
        assert mean([1, 2]) == pytest.approx(1.5, rel=1e-9)
    """)
honest("sorted_objects", "objects", S("""
    class Task:
        def __init__(self, name, prio):
            self.name, self.prio = name, prio
        def __lt__(self, other):
            return self.prio < other.prio

    def order(tasks):
        return [t.name for t in sorted(tasks)]
    """), """
    from solution import Task, order

    def test_order():
        assert order([Task("b", 2), Task("a", 1)]) == ["a", "b"]
    """)
honest("in_place_sort", "objects", S("""
    def sort_in_place(xs):
        xs.sort()
    """), """
    from solution import sort_in_place

    def test_in_place():
        a = [3, 1, 2]
        sort_in_place(a)
        assert a == [1, 2, 3]
    """)
honest("async_coroutine", "objects", S("""
    import asyncio

    async def double(x):
        await asyncio.sleep(0)
        return 2 * x
    """), """
    import asyncio
    from solution import double

    def test_double():
        assert asyncio.run(double(4)) == 8
    """)
honest("mock_callback", "objects", S("""
    def apply(fn, xs):
        return [fn(x) for x in xs]
    """), """
    from unittest.mock import Mock
    from solution import apply

    def test_mock():
        m = Mock(side_effect=lambda x: x + 1)
        assert apply(m, [1, 2]) == [2, 3]
        assert m.call_count == 2
    """)
honest("class_hierarchy", "objects", S("""
    class Shape:
        def area(self):
            raise NotImplementedError

    class Square(Shape):
        def __init__(self, s):
            self.s = s
        def area(self):
            return self.s * self.s
    """), """
    from solution import Shape, Square

    def test_square():
        sq = Square(3)
        assert isinstance(sq, Shape)
        assert sq.area() == 9
    """)

# -- outside the design: counted and shown, never a silent zero
HONEST["tmp_path_program_reads"] = ("files", S("""
    def count_lines(path):
        with open(path) as f:
            return sum(1 for _ in f)
    """), S("""
    from solution import count_lines

    def test_count(tmp_path):
        p = tmp_path / "data.txt"
        p.write_text("a\\nb\\nc\\n")
        assert count_lines(str(p)) == 3
    """))
HONEST["monkeypatch_input"] = ("builtin fixtures", S("""
    def ask():
        return input("name? ").upper()
    """), S("""
    from solution import ask

    def test_ask(monkeypatch):
        monkeypatch.setattr("builtins.input", lambda _: "bob")
        assert ask() == "BOB"
    """))
HONEST["monkeypatch_env"] = ("builtin fixtures", S("""
    import os

    def mode():
        return os.environ.get("APP_MODE", "dev")
    """), S("""
    from solution import mode

    def test_mode(monkeypatch):
        monkeypatch.setenv("APP_MODE", "prod")
        assert mode() == "prod"
    """))
HONEST["seeded_random"] = ("builtin fixtures", S("""
    import random

    def rolls(n):
        return [random.randint(1, 6) for _ in range(n)]
    """), S("""
    import random
    from solution import rolls

    def test_rolls():
        expected = [random.Random(7).randint(1, 6) for _ in range(1)]
        gen = random.Random(7)
        expected = [gen.randint(1, 6) for _ in range(20)]
        random.seed(7)
        assert rolls(20) == expected
    """))

# -- wrong programs: each must score below 1.0
WRONG["class_only_wrong"] = (S("""
    class Stack:
        def __init__(self):
            self.items = []
        def push(self, x):
            pass
        def pop(self):
            return None
        def is_empty(self):
            return False
    """), HONEST["class_only"][2])
WRONG["builtin_named_wrong_sorted"] = (S("""
    def sorted(xs):
        return list(xs)
    """), HONEST["star_builtin_sorted"][2])
WRONG["builtin_named_import_wrong"] = (S("""
    def sorted(xs):
        return list(xs)
    """), HONEST["named_builtin_import"][2])
WRONG["unittest_wrong"] = (S("""
    def add(a, b):
        return a - b
    """), HONEST["unittest_case"][2])
WRONG["fixture_wrong"] = (S("""
    def add(a, b):
        return a * b
    """), HONEST["fixture_value"][2])
WRONG["capsys_wrong"] = (S("""
    def greet(name):
        print("Hello,", name)
    """), HONEST["capsys_out"][2])
WRONG["capsys_returns_instead"] = (S("""
    def greet(name):
        return f"Hello, {name}!"
    """), HONEST["capsys_out"][2])
WRONG["global_wrong"] = (S("""
    history = []
    registry = {}
    counter = 0

    def record(x):
        return 1
    """), HONEST["global_list_live"][2])
WRONG["raises_wrong"] = (S("""
    class Stack:
        def __init__(self):
            self.items = []
        def pop(self):
            return None
    """), HONEST["raises_match"][2])
WRONG["custom_attrs_wrong"] = (BANK.replace("self.needed = needed", "self.needed = 0"),
                               HONEST["raises_custom_attrs"][2])
WRONG["generator_wrong"] = (S("""
    def count_up(n):
        return list(range(n + 1))
    """), HONEST["generator_resume"][2] if "generator_resume" in HONEST else HONEST["generator_next_resume"][2])
WRONG["parametrize_wrong"] = (S("""
    def add(a, b):
        return a + b if a < 2 else 0
    """), HONEST["parametrize_stack"][2])
WRONG["guard_wrong"] = (S("""
    def add(a, b):
        return 3
    """), HONEST["pytest_main_guard"][2])
WRONG["xunit_wrong"] = (STACK.replace("self.items.append(x)", "pass"), HONEST["class_setup_method"][2])
WRONG["star_wrong"] = (S("""
    def add(a, b):
        return a + b + 1

    def greet(name):
        print(f"Hello, {name}!")
    """), HONEST["star_import"][2])
WRONG["missing_function"] = (S("""
    def plus(a, b):
        return a + b
    """), HONEST["fixture_value"][2])
WRONG["dataclass_wrong"] = (S("""
    from dataclasses import dataclass

    @dataclass
    class Point:
        x: int
        y: int

        def moved(self, dx, dy):
            return Point(self.x + dx, self.y)
    """), HONEST["dataclass_equality"][2])
WRONG["exit_in_program"] = (S("""
    import sys
    def add(a, b):
        sys.exit(0)
    """), HONEST["unittest_case"][2])
WRONG["approx_wrong"] = (S("""
    def mean(xs):
        return sum(xs) / (len(xs) + 1)
    """), HONEST["approx_float"][2])
WRONG["context_manager_wrong"] = (S("""
    class Timer:
        def __enter__(self):
            self.entered = True
            return self
        def __exit__(self, *exc):
            return False
    """), HONEST["context_manager"][2])

# a generator's type, asyncio.gather, async generators, logging: plain Python or counted
honest("asyncio_gather", "async", S("""
    import asyncio

    async def fetch(x):
        await asyncio.sleep(0.01)
        return x * 10
    """), """
    import asyncio
    from solution import fetch

    def test_gather():
        async def main():
            return await asyncio.gather(fetch(1), fetch(2), fetch(3))
        assert asyncio.run(main()) == [10, 20, 30]
    """)
honest("async_generator_collect", "async", S("""
    async def ticks(n):
        for i in range(n):
            yield i
    """), """
    import asyncio
    from solution import ticks

    def test_ticks():
        async def main():
            return [x async for x in ticks(3)]
        assert asyncio.run(main()) == [0, 1, 2]
    """)
honest("logging_caplog", "logging", S("""
    import logging

    log = logging.getLogger("app")

    def process(x):
        log.warning("processing %s", x)
        return x + 1
    """), """
    import logging
    from solution import process

    def test_logs(caplog):
        with caplog.at_level(logging.WARNING):
            assert process(1) == 2
        assert "processing 1" in caplog.text
    """)
honest("logging_return_only", "logging", S("""
    import logging

    logging.basicConfig(level=logging.INFO)

    def process(x):
        logging.info("got %s", x)
        return x * 2
    """), """
    from solution import process

    def test_value():
        assert process(4) == 8
    """)

honest("context_manager_fills_dict", "objects", S("""
    class Recorder:
        def __init__(self, sink):
            self.sink = sink
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            self.sink["closed"] = True
            return False
    """), S("""
    from solution import Recorder

    def test_sink():
        sink = {}
        with Recorder(sink):
            pass
        assert sink == {"closed": True}
    """))

honest("test_object_lent", "objects", S("""
    def total_value(nodes):
        return sum(n.value for n in nodes)

    def longest(words, key):
        return max(words, key=key)
    """), """
    from solution import longest, total_value

    class Node:
        def __init__(self, value):
            self.value = value

    def word_len(w):
        return len(w)

    def test_nodes():
        assert total_value([Node(1), Node(2)]) == 3

    def test_key():
        assert longest(["a", "abc", "ab"], word_len) == "abc"
    """)

honest("mock_patch_program_global", "builtin fixtures", S("""
    def fetch(url):
        raise ConnectionError("no network here")

    def title(url):
        return fetch(url).upper()
    """), """
    from unittest import mock
    import solution

    def test_title():
        with mock.patch("solution.fetch", return_value="hello") as fake:
            assert solution.title("http://x") == "HELLO"
        fake.assert_called_once_with("http://x")
    """)
honest("monkeypatch_program_global", "builtin fixtures", S("""
    def now():
        raise RuntimeError("clock")

    def stamp(msg):
        return f"[{now()}] {msg}"
    """), """
    import solution

    def test_stamp(monkeypatch):
        monkeypatch.setattr(solution, "now", lambda: "12:00")
        assert solution.stamp("hi") == "[12:00] hi"
    """)
honest("monkeypatch_stdin", "builtin fixtures", S("""
    import sys

    def read_total():
        return sum(int(line) for line in sys.stdin.read().split())
    """), """
    import io
    from solution import read_total

    def test_total(monkeypatch):
        monkeypatch.setattr("sys.stdin", io.StringIO("1 2\\n3\\n"))
        assert read_total() == 6
    """)
honest("random_shared_stream", "builtin fixtures", S("""
    import random

    def shuffled(xs):
        xs = list(xs)
        random.shuffle(xs)
        return xs
    """), """
    import random
    from solution import shuffled

    def test_shuffle():
        random.seed(3)
        got = shuffled(range(10))
        random.seed(3)
        expected = list(range(10))
        random.shuffle(expected)
        assert got == expected
        assert random.random() == random.random() or True
    """)

honest("tmp_path_program_writes", "files", S("""
    import json

    def save(path, data):
        with open(path, "w") as f:
            json.dump(data, f)
    """), """
    import json
    from solution import save

    def test_save(tmp_path):
        target = tmp_path / "out.json"
        save(str(target), {"a": 1})
        assert json.loads(target.read_text()) == {"a": 1}
    """)
honest("tmpdir_legacy", "files", S("""
    def word_count(path):
        with open(path) as f:
            return len(f.read().split())
    """), """
    from solution import word_count

    def test_count(tmpdir):
        p = tmpdir.join("words.txt")
        p.write("one two three")
        assert word_count(str(p)) == 3
    """)
honest("relative_file_written_by_program", "files", S("""
    def write_report(lines):
        with open("report.txt", "w") as f:
            f.write("\\n".join(lines))
        return len(lines)
    """), """
    import os
    from solution import write_report

    def test_report():
        assert write_report(["a", "b"]) == 2
        assert os.path.exists("report.txt")
        with open("report.txt") as f:
            assert f.read() == "a\\nb"
    """)
honest("test_writes_then_program_appends", "files", S("""
    def append_line(path, line):
        with open(path, "a") as f:
            f.write(line + "\\n")

    def read_lines(path):
        with open(path) as f:
            return f.read().splitlines()
    """), """
    from solution import append_line, read_lines

    def test_append(tmp_path):
        p = tmp_path / "log.txt"
        p.write_text("first\\n")
        append_line(str(p), "second")
        assert read_lines(str(p)) == ["first", "second"]
        assert p.read_text() == "first\\nsecond\\n"
    """)
honest("csv_roundtrip", "files", S("""
    import csv

    def total_column(path, column):
        with open(path, newline="") as f:
            return sum(float(row[column]) for row in csv.DictReader(f))
    """), """
    import csv
    from solution import total_column

    def test_total(tmp_path):
        p = tmp_path / "data.csv"
        with open(p, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["name", "price"])
            w.writerow(["a", "1.5"])
            w.writerow(["b", "2.5"])
        assert total_column(str(p), "price") == 4.0
    """)
honest("missing_file_raises", "files", S("""
    def load(path):
        with open(path) as f:
            return f.read()
    """), """
    import pytest
    from solution import load

    def test_missing(tmp_path):
        with pytest.raises(FileNotFoundError):
            load(str(tmp_path / "nope.txt"))
    """)
WRONG["file_wrong"] = (S("""
    def count_lines(path):
        return 0
    """), HONEST["tmp_path_program_reads"][2])

honest("container_in_test_object", "objects", S("""
    def add_item(cart, item):
        cart.items.append(item)
        return len(cart.items)
    """), """
    from solution import add_item

    class Cart:
        def __init__(self):
            self.items = []

    def test_add():
        cart = Cart()
        assert add_item(cart, "apple") == 1
        assert cart.items == ["apple"]
    """)
honest("program_deep_copies_test_object", "objects", S("""
    import copy

    def with_bonus(config):
        new = copy.deepcopy(config)
        new["bonus"] = True
        return new
    """), """
    from solution import with_bonus

    def test_copy():
        cfg = {"level": 1}
        out = with_bonus(cfg)
        assert out == {"level": 1, "bonus": True}
        assert cfg == {"level": 1}
    """)
honest("generator_sliced_by_program", "generators", S("""
    import itertools

    def first_n(iterable, n):
        return list(itertools.islice(iterable, n))
    """), """
    from solution import first_n

    def squares():
        i = 0
        while True:
            yield i * i
            i += 1

    def test_first():
        g = squares()
        assert first_n(g, 3) == [0, 1, 4]
        assert next(g) == 9
    """)
honest("exception_attr_after_catch", "exceptions", S("""
    class ValidationError(Exception):
        def __init__(self, field, reason):
            super().__init__(f"{field}: {reason}")
            self.field = field
            self.reason = reason

    def validate(user):
        if not user.get("name"):
            raise ValidationError("name", "missing")
        return True
    """), """
    import pytest
    from solution import ValidationError, validate

    @pytest.mark.parametrize("user,field", [({}, "name"), ({"name": ""}, "name")])
    def test_invalid(user, field):
        with pytest.raises(ValidationError) as e:
            validate(user)
        assert e.value.field == field and e.value.reason == "missing"
        assert str(e.value) == "name: missing"
    """)

honest("context_manager_prints", "objects", S("""
    import time

    class timer:
        def __init__(self, label):
            self.label = label
        def __enter__(self):
            print(f"start {self.label}")
            self.t = time.perf_counter()
            return self
        def __exit__(self, *exc):
            print(f"end {self.label}")
            return False
    """), """
    from solution import timer

    def test_prints(capsys):
        with timer("load"):
            pass
        assert capsys.readouterr().out == "start load\\nend load\\n"
    """)
outside("context_manager_suppresses", "a program's context manager cannot suppress an exception raised in the test",
        "objects", S("""
    class ignoring:
        def __init__(self, *kinds):
            self.kinds = kinds
        def __enter__(self):
            return self
        def __exit__(self, kind, exc, tb):
            return kind is not None and issubclass(kind, self.kinds)
    """), """
    from solution import ignoring

    def test_suppress():
        with ignoring(KeyError):
            {}["x"]
        assert True
    """)

honest("program_exits_under_raises", "exceptions", S("""
    import sys

    def main(args):
        if not args:
            print("usage: main ARGS", file=sys.stderr)
            sys.exit(2)
        return len(args)
    """), """
    import pytest
    from solution import main

    def test_usage(capsys):
        with pytest.raises(SystemExit) as e:
            main([])
        assert e.value.code == 2
        assert "usage" in capsys.readouterr().err

    def test_ok():
        assert main(["a"]) == 1
    """)
honest("main_reads_input_prints", "builtin fixtures", S("""
    def main():
        n = int(input())
        nums = list(map(int, input().split()))
        print(sum(nums[:n]))
    """), """
    from solution import main

    def test_main(monkeypatch, capsys):
        lines = iter(["3", "1 2 3 4"])
        monkeypatch.setattr("builtins.input", lambda *a: next(lines))
        main()
        assert capsys.readouterr().out.strip() == "6"
    """)
honest("result_types", "objects", S("""
    def group(words):
        out = {}
        for w in words:
            out.setdefault(len(w), []).append(w)
        return out
    """), """
    from solution import group

    def test_types():
        res = group(["a", "bb", "cc"])
        assert isinstance(res, dict) and type(res) is dict
        assert res == {1: ["a"], 2: ["bb", "cc"]}
        assert all(isinstance(v, list) for v in res.values())
    """)

honest("logging_assert_logs", "logging", S("""
    import logging

    logger = logging.getLogger("inventory")

    def remove(stock, item):
        if item not in stock:
            logger.error("missing item %s", item)
            return False
        stock.remove(item)
        return True
    """), """
    import unittest
    from solution import remove

    class T(unittest.TestCase):
        def test_logs_missing(self):
            with self.assertLogs("inventory", level="ERROR") as cm:
                self.assertFalse(remove(["a"], "b"))
            self.assertEqual(cm.output, ["ERROR:inventory:missing item b"])
    """)
honest("logging_caplog_records_info", "logging", S("""
    import logging

    def step(n):
        logging.getLogger("worker").info("step %d", n)
        return n + 1
    """), """
    import logging
    from solution import step

    def test_records(caplog):
        caplog.set_level(logging.INFO, logger="worker")
        assert step(1) == 2
        assert [r.getMessage() for r in caplog.records] == ["step 1"]
        assert caplog.records[0].levelname == "INFO"
    """)

honest("generator_send_close", "generators", S("""
    def averager():
        total = count = 0
        avg = None
        while True:
            x = yield avg
            total += x
            count += 1
            avg = total / count
    """), """
    import inspect
    from solution import averager

    def test_send():
        g = averager()
        assert inspect.isgenerator(g) and type(g).__name__ == "generator"
        next(g)
        assert g.send(10) == 10
        assert g.send(20) == 15
        g.close()
    """)

outside("money_equals_number", "a program object compared with a plain value", "objects", S("""
    class Money:
        def __init__(self, cents):
            self.cents = cents
        def __eq__(self, other):
            if isinstance(other, (int, float)):
                return self.cents == round(other * 100)
            return isinstance(other, Money) and self.cents == other.cents
    """), """
    from solution import Money

    def test_equals_number():
        assert Money(150) == 1.5
    """)
outside("contains_without_iter", "a plain value's membership in a program object is checked by iterating it",
        "objects", S("""
    class Evens:
        def __contains__(self, x):
            return x % 2 == 0
    """), """
    from solution import Evens

    def test_in():
        assert 4 in Evens()
    """)
