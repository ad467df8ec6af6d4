"""Honest programs in the families where a two-process judge can differ from plain Python (issue 18's list).

``FAMILIES``: name -> (family, solution, asserts). Every one must earn the full code reward.
``OUTSIDE``: name -> (why, solution, asserts): correct programs that the design cannot give plain-Python behaviour;
they must score below 1.0 *and* be reported as outside the design (never a silent zero).
"""

from __future__ import annotations

from honest_programs import S

FAMILIES: dict[str, tuple[str, str, list[str]]] = {
    # -- arguments changed in place, during the call or later, through objects that keep them
    "sorter_keeps_list": ("in-place", S("""
        class Sorter:
            def __init__(self, items):
                self.items = items
            def sort(self):
                self.items.sort()
        """), ["a = [3, 1, 2]\ns = Sorter(a)\ns.sort()\nassert a == [1, 2, 3]"]),
    "graph_keeps_dict": ("in-place", S("""
        class Graph:
            def __init__(self, adj):
                self.adj = adj
            def add_edge(self, u, v):
                self.adj.setdefault(u, []).append(v)
        """), ["adj = {}\ng = Graph(adj)\ng.add_edge(1, 2)\ng.add_edge(1, 3)\nassert adj == {1: [2, 3]}"]),
    "returns_same_list": ("in-place", S("""
        def sort_in_place(xs):
            xs.sort()
            return xs
        """), ["a = [2, 1]\nassert sort_in_place(a) is a and a == [1, 2]"]),
    "test_changes_after_handing_over": ("in-place", S("""
        class Holder:
            def __init__(self, xs):
                self.xs = xs
            def total(self):
                return sum(self.xs)
        """), ["a = [3, 1]\nh = Holder(a)\na.append(2)\nassert h.total() == 6"]),
    "matrix_rows_in_place": ("in-place", S("""
        def zero_first_column(m):
            for row in m:
                row[0] = 0
        """), ["m = [[1, 2], [3, 4]]\nzero_first_column(m)\nassert m == [[0, 2], [0, 4]]"]),
    "deque_in_place": ("in-place", S("""
        def rotate_once(d):
            d.rotate(1)
        """), ["from collections import deque\nd = deque([1, 2, 3])\nrotate_once(d)\nassert d == deque([3, 1, 2])"]),
    "memo_dict_filled": ("in-place", S("""
        class Memo:
            def __init__(self, cache):
                self.cache = cache
            def square(self, n):
                if n not in self.cache:
                    self.cache[n] = n * n
                return self.cache[n]
        """), ["cache = {}\nm = Memo(cache)\nassert m.square(3) == 9 and cache == {3: 9}\n"
               "cache[4] = 0\nassert m.square(4) == 0"]),
    "bytearray_in_place": ("in-place", S("""
        def upper_in_place(buf):
            buf[:] = buf.upper()
        """), ["b = bytearray(b'abc')\nupper_in_place(b)\nassert b == bytearray(b'ABC')"]),
    # -- containers reached through a program object's attributes are that object's
    "stack_items_attribute": ("attribute-container", S("""
        class Stack:
            def __init__(self):
                self.items = []
            def size(self):
                return len(self.items)
        """), ["s = Stack()\ns.items.append(1)\ns.items.append(2)\nassert s.size() == 2 and s.items == [1, 2]"]),
    "graph_adjacency_attribute": ("attribute-container", S("""
        class Graph:
            def __init__(self):
                self.adj = {}
            def neighbors(self, u):
                return self.adj.get(u, [])
        """), ["g = Graph()\ng.adj.setdefault(1, []).append(2)\nassert g.neighbors(1) == [2]"]),
    "attribute_dict_setitem": ("attribute-container", S("""
        class Store:
            def __init__(self):
                self.data = {}
            def get(self, k):
                return self.data.get(k)
        """), ["s = Store()\ns.data['k'] = 5\nassert s.get('k') == 5 and len(s.data) == 1"]),
    "attribute_identity_and_type": ("attribute-container", S("""
        class Bag:
            def __init__(self):
                self.items = [1, 2]
        """), ["b = Bag()\nassert b.items is b.items and isinstance(b.items, list) and sorted(b.items) == [1, 2]"]),
    "attribute_set": ("attribute-container", S("""
        class Seen:
            def __init__(self):
                self.names = set()
            def saw(self, n):
                return n in self.names
        """), ["s = Seen()\ns.names.add('x')\nassert s.saw('x') and 'x' in s.names"]),
    "linked_list_walk": ("attribute-container", S("""
        class Node:
            def __init__(self, val, nxt=None):
                self.val, self.next = val, nxt
        def build(xs):
            head = None
            for x in reversed(xs):
                head = Node(x, head)
            return head
        """), [
               "h = build([1, 2, 3])\nout = []\nwhile h:\n    out.append(h.val)\n    h = h.next\n"
               "assert out == [1, 2, 3]"]),
    # -- exceptions keep their message, attributes and class
    "exception_message": ("exceptions", S("""
        class InsufficientFunds(Exception):
            pass
        def withdraw(balance, amount):
            if amount > balance:
                raise InsufficientFunds(f"balance {balance} < {amount}")
            return balance - amount
        """), ["try:\n    withdraw(10, 100)\nexcept InsufficientFunds as e:\n"
               "    assert str(e) == 'balance 10 < 100'\nelse:\n    raise AssertionError"]),
    "exception_attributes": ("exceptions", S("""
        class ParseError(ValueError):
            def __init__(self, line, msg):
                super().__init__(msg)
                self.line = line
        def parse(text):
            raise ParseError(3, 'unexpected token')
        """), [
               "try:\n    parse('x')\nexcept ValueError as e:\n"
               "    assert e.line == 3 and str(e) == 'unexpected token'"]),
    "exception_custom_str": ("exceptions", S("""
        class Custom(Exception):
            def __str__(self):
                return 'custom message'
        def f():
            raise Custom()
        """), ["try:\n    f()\nexcept Exception as e:\n    assert str(e) == 'custom message'"]),
    "keyerror_message": ("exceptions", S("""
        def lookup(d, k):
            return d[k]
        """), ["try:\n    lookup({}, 'x')\nexcept KeyError as e:\n    assert str(e) == \"'x'\" and e.args == ('x',)"]),
    "exception_hierarchy": ("exceptions", S("""
        class BankError(Exception):
            pass
        class Frozen(BankError):
            pass
        def pay():
            raise Frozen('account frozen')
        """), [
               "try:\n    pay()\nexcept BankError as e:\n"
               "    assert type(e).__name__ == 'Frozen' and isinstance(e, Frozen)"]),
    "stdlib_exception_class": ("exceptions", S("""
        import json
        def load(text):
            return json.loads(text)
        """), ["import json\ntry:\n    load('{')\nexcept json.JSONDecodeError as e:\n    assert e.pos == 1\n"
               "else:\n    raise AssertionError"]),
    "exception_args_tuple": ("exceptions", S("""
        def fail(a, b):
            raise ValueError(a, b)
        """), ["try:\n    fail(1, 2)\nexcept ValueError as e:\n    assert e.args == (1, 2)"]),
    "exception_matched_by_regex": ("exceptions", S("""
        def check_age(n):
            if n < 0:
                raise ValueError(f'age must be >= 0, got {n}')
            return n
        """), ["import re\ntry:\n    check_age(-5)\nexcept ValueError as e:\n    assert re.search(r'got -5', str(e))"]),
    # -- truth values of returned objects are the program's
    "regex_match_truthy": ("truthiness", S("""
        import re
        def is_word(s):
            return re.fullmatch(r'[a-z]+', s)
        """), ["assert is_word('abc')", "assert not is_word('a1')"]),
    "empty_container_class": ("truthiness", S("""
        class Bag:
            def __init__(self, xs=()):
                self.xs = list(xs)
            def __len__(self):
                return len(self.xs)
        """), ["assert not Bag()", "assert Bag([1])", "assert bool(Bag()) is False"]),
    "custom_bool": ("truthiness", S("""
        class Result:
            def __init__(self, ok):
                self.ok = ok
            def __bool__(self):
                return self.ok
        def validate(x):
            return Result(x > 0)
        """), [
               "assert validate(3)", "assert not validate(-3)", "r = validate(1)\nif r:\n    pass\nelse:\n"
               "    raise AssertionError"]),
    "truthy_in_filter": ("truthiness", S("""
        import re
        def words(items):
            return [m for m in (re.match(r'\\w+', s) for s in items)]
        """), ["assert [bool(m) for m in words(['ab', '!'])] == [True, False]"]),
    # -- objects the test lends the program
    "wraps_a_test_function": ("lent-objects", S("""
        import functools
        def logged(fn):
            @functools.wraps(fn)
            def inner(*a):
                return fn(*a)
            return inner
        """), [
               "def add(a, b):\n    '''Adds.'''\n    return a + b\ng = logged(add)\n"
               "assert g(1, 2) == 3 and g.__name__ == 'add'"]),
    "deepcopies_a_lent_function": ("lent-objects", S("""
        import copy
        def apply_copy(fn, x):
            return copy.deepcopy(fn)(x)
        """), ["assert apply_copy(lambda v: v * 2, 4) == 8"]),
    "writes_to_stringio": ("lent-objects", S("""
        def write_lines(stream, xs):
            for x in xs:
                stream.write(f'{x}\\n')
        """), ["import io\nbuf = io.StringIO()\nwrite_lines(buf, [1, 2])\nassert buf.getvalue() == '1\\n2\\n'"]),
    "draws_from_lent_random": ("lent-objects", S("""
        def pick(rng, xs):
            return rng.choice(xs)
        """), [
               "import random\nxs = list(range(100))\n"
               "assert pick(random.Random(5), xs) == random.Random(5).choice(xs)"]),
    "fills_a_queue": ("lent-objects", S("""
        def produce(q, n):
            for i in range(n):
                q.put(i)
        """), ["import queue\nq = queue.Queue()\nproduce(q, 3)\nassert q.qsize() == 3 and q.get() == 0"]),
    "sorts_with_stdlib_key": ("lent-objects", S("""
        def sort_by(words, key):
            return sorted(words, key=key)
        """), ["assert sort_by(['b', 'A', 'c'], str.lower) == ['A', 'b', 'c']",
               "import operator\n"
               "assert sort_by([(1, 'b'), (0, 'a')], operator.itemgetter(1)) == [(0, 'a'), (1, 'b')]"]),
    "reads_test_object_fields": ("lent-objects", S("""
        def total(nodes):
            return sum(n.val for n in nodes)
        """), ["class N:\n    def __init__(self, v):\n        self.val = v\nassert total([N(1), N(2)]) == 3"]),
    # -- callbacks nested deeply between the test and the program
    "deep_callback_recursion": ("callbacks", S("""
        def bounce(fn, n):
            return fn(n)
        """), ["def t(n):\n    return 0 if n == 0 else 1 + bounce(t, n - 1)\nassert t(300) == 300"]),
    "callback_with_state": ("callbacks", S("""
        def each(xs, fn):
            for x in xs:
                fn(x)
        """), ["seen = []\neach([1, 2, 3], seen.append)\nassert seen == [1, 2, 3]"]),
    # -- what a call writes where the test captures it
    "stderr_captured": ("capture", S("""
        import sys
        def warn_user():
            print('careful', file=sys.stderr)
        """), ["import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stderr(buf):\n    warn_user()\n"
               "assert 'careful' in buf.getvalue()"]),
    "warning_recorded": ("capture", S("""
        import warnings
        def old_api():
            warnings.warn('use new_api', DeprecationWarning)
            return 1
        """), ["import warnings\nwith warnings.catch_warnings(record=True) as w:\n    warnings.simplefilter('always')\n"
               "    assert old_api() == 1\nassert len(w) == 1 and issubclass(w[0].category, DeprecationWarning)\n"
               "assert 'new_api' in str(w[0].message)"]),
    "prints_from_generator": ("capture", S("""
        def noisy(n):
            for i in range(n):
                print(i)
                yield i
        """), ["import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n"
               "    assert list(noisy(3)) == [0, 1, 2]\nassert buf.getvalue() == '0\\n1\\n2\\n'"]),
    "prints_from_method": ("capture", S("""
        class Board:
            def show(self):
                print('x|o')
        """), ["import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n    Board().show()\n"
               "assert buf.getvalue() == 'x|o\\n'"]),
    # -- values too large for one frame, numbers beyond the default digit limit
    "twenty_megabyte_string": ("large-values", S("""
        def text(n):
            return 'ab' * n
        """), ["assert len(text(10 ** 7)) == 2 * 10 ** 7"]),
    "three_million_list": ("large-values", S("""
        def numbers_up_to(n):
            return list(range(n))
        """), ["r = numbers_up_to(3 * 10 ** 6)\nassert r[-1] == 3 * 10 ** 6 - 1 and len(r) == 3 * 10 ** 6"]),
    "huge_integer_as_text": ("large-values", S("""
        import math
        def fact(n):
            return math.factorial(n)
        """), ["assert str(fact(2000)).startswith('3316') and len(str(fact(2000))) == 5736"]),
    # -- names: the program's functions even when named like modules; modules the program imported
    "function_named_like_module": ("names", S("""
        def calendar(year):
            return year % 4 == 0
        def statistics(xs):
            return sum(xs) / len(xs)
        """), ["assert calendar(2024) and statistics([1, 3]) == 2"]),
    "numpy_alias_from_program": ("names", S("""
        import numpy as np
        def ramp(n):
            return np.arange(1, n + 1)
        """), ["assert np.array_equal(ramp(2), np.array([1, 2]))"]),
    "math_without_import_in_test": ("names", S("""
        import math
        def circle(r):
            return math.pi * r * r
        """), ["assert math.isclose(circle(1), math.pi)"]),
    "import_solution_in_test": ("names", S("""
        def double(x):
            return 2 * x
        """), [
               "from solution import double as d\nassert d(4) == 8", "import solution\n"
               "assert solution.double(1) == 2"]),
    # -- values of the standard library's small record types
    "simple_namespace": ("values", S("""
        import types
        def make(x):
            return types.SimpleNamespace(x=x, y=[x])
        """), ["import types\nassert make(1) == types.SimpleNamespace(x=1, y=[1])"]),
    "namedtuple_of_program": ("values", S("""
        from collections import namedtuple
        Point = namedtuple('Point', 'x y')
        def origin():
            return Point(0, 0)
        """), ["p = origin()\nassert isinstance(p, Point) and p == (0, 0) and p.x == 0 and p == Point(0, 0)"]),
    "namedtuple_method": ("values", S("""
        from urllib.parse import urlparse
        def parse(u):
            return urlparse(u)
        """), ["p = parse('http://a.b/c?d=1')\nassert p.netloc == 'a.b' and p.geturl() == 'http://a.b/c?d=1'"]),
    "dataclass_equality": ("values", S("""
        from dataclasses import dataclass
        @dataclass
        class Point:
            x: int
            y: int
        def mid(a, b):
            return Point((a.x + b.x) // 2, (a.y + b.y) // 2)
        """), ["assert mid(Point(0, 0), Point(2, 4)) == Point(1, 2)"]),
    "frozen_set_of_objects": ("values", S("""
        from dataclasses import dataclass
        @dataclass(frozen=True)
        class P:
            x: int
        def ps():
            return frozenset({P(1), P(2)})
        """), ["assert len(ps()) == 2 and P(1) in ps()"]),
    # -- iteration
    "generator_stepwise": ("iteration", S("""
        def countdown(n):
            while n:
                yield n
                n -= 1
        """), ["g = countdown(3)\nassert next(g) == 3\nassert list(g) == [2, 1]"]),
    "generator_send": ("iteration", S("""
        def acc():
            total = 0
            while True:
                x = yield total
                total += x
        """), ["g = acc()\nnext(g)\nassert g.send(5) == 5 and g.send(2) == 7"]),
    "infinite_generator_islice": ("iteration", S("""
        import itertools
        def naturals():
            return itertools.count(1)
        """), ["import itertools\nassert list(itertools.islice(naturals(), 5)) == [1, 2, 3, 4, 5]"]),
    "custom_iterator_class": ("iteration", S("""
        class Range2:
            def __init__(self, n):
                self.i, self.n = 0, n
            def __iter__(self):
                return self
            def __next__(self):
                if self.i >= self.n:
                    raise StopIteration
                self.i += 1
                return self.i - 1
        """), ["assert list(Range2(3)) == [0, 1, 2] and sum(Range2(4)) == 6"]),
    "zip_of_generators": ("iteration", S("""
        def squares(n):
            for i in range(n):
                yield i * i
        """), ["assert list(zip(squares(3), 'abc')) == [(0, 'a'), (1, 'b'), (4, 'c')]"]),
    # -- coroutines
    "asyncio_run": ("async", S("""
        import asyncio
        async def fetch(x):
            await asyncio.sleep(0)
            return x + 1
        """), ["import asyncio\nassert asyncio.run(fetch(1)) == 2"]),
    "asyncio_gather": ("async", S("""
        async def fetch(x):
            return x * 10
        """), ["import asyncio\nasync def main():\n    return await asyncio.gather(fetch(1), fetch(2))\n"
               "assert asyncio.run(main()) == [10, 20]"]),
    # -- context managers and operators between program objects
    "context_manager": ("protocols", S("""
        class Timer:
            def __enter__(self):
                self.entered = True
                return self
            def __exit__(self, *exc):
                self.closed = True
                return False
        """), ["with Timer() as t:\n    assert t.entered\nassert t.closed"]),
    "vector_arithmetic": ("protocols", S("""
        class V:
            def __init__(self, x, y):
                self.x, self.y = x, y
            def __add__(self, o):
                return V(self.x + o.x, self.y + o.y)
            def __eq__(self, o):
                return (self.x, self.y) == (o.x, o.y)
        """), ["assert V(1, 2) + V(3, 4) == V(4, 6)"]),
    "ordering_between_objects": ("protocols", S("""
        import functools
        @functools.total_ordering
        class Card:
            def __init__(self, r):
                self.r = r
            def __eq__(self, o):
                return self.r == o.r
            def __lt__(self, o):
                return self.r < o.r
        """), ["assert Card(2) < Card(5) and max(Card(1), Card(9)).r == 9 and sorted([Card(3), Card(1)])[0].r == 1"]),
    "str_and_repr": ("protocols", S("""
        class Money:
            def __init__(self, c):
                self.c = c
            def __str__(self):
                return f'${self.c / 100:.2f}'
            def __repr__(self):
                return f'Money({self.c})'
        """), ["assert str(Money(150)) == '$1.50' and repr(Money(1)) == 'Money(1)' and f'{Money(5)}' == '$0.05'"]),
    "int_enum_values": ("protocols", S("""
        import enum
        class Color(enum.IntEnum):
            RED = 1
            GREEN = 2
        def favourite():
            return Color.GREEN
        """), ["assert favourite() == 2 and favourite() == Color.GREEN and favourite().name == 'GREEN'"]),
    "hash_and_dict_keys": ("protocols", S("""
        class K:
            def __init__(self, v):
                self.v = v
            def __hash__(self):
                return hash(self.v)
            def __eq__(self, o):
                return self.v == o.v
        def index(keys):
            return {k: i for i, k in enumerate(keys)}
        """), ["d = index([K(1), K(2)])\nassert d[K(2)] == 1 and len(d) == 2"]),
}

OUTSIDE: dict[str, tuple[str, str, list[str]]] = {
    "eq_with_plain_value": ("a program object compared with a plain value: never sent to the program", S("""
        class Money:
            def __init__(self, c):
                self.c = c
            def __eq__(self, o):
                return self.c / 100 == o
        """), ["assert Money(150) == 1.5"]),
    "radd_in_sum": ("arithmetic between a plain value and a program object", S("""
        class Cents:
            def __init__(self, c):
                self.c = c
            def __radd__(self, o):
                return o + self.c
        """), ["assert sum([Cents(1), Cents(2)]) == 3"]),
    "contains_only": ("membership of a plain value in a program object without __iter__", S("""
        class Evens:
            def __contains__(self, x):
                return x % 2 == 0
        """), ["assert 4 in Evens()"]),
}
