"""Honest object-heavy programs, as dataset authors write their solutions and asserts (issue 52, item 7).

``OBJECTS``: name -> (family, solution, asserts). Every one passes in plain Python (``plain_python_passes``); the
test file checks that first, then scores them through the code reward. This file holds resumed generators, context
managers, type identity, plain values with program objects and records; ``honest_objects_io`` the rest.
"""

from __future__ import annotations

from honest_programs import S

OBJECTS: dict[str, tuple[str, str, list[str]]] = {
    # -- resumed generators: next() across asserts, send, passed around, itertools over them
    "gen_next_across_asserts": ("generators", S("""
        def count_up(start):
            n = start
            while True:
                yield n
                n += 1
        """), ["g = count_up(5)\nassert next(g) == 5\nassert next(g) == 6\nassert next(g) == 7"]),
    "gen_islice_then_next": ("generators", S("""
        def squares():
            i = 0
            while True:
                yield i * i
                i += 1
        """), ["from itertools import islice\ng = squares()\nassert list(islice(g, 3)) == [0, 1, 4]\n"
               "assert next(g) == 9", "import itertools\ng = squares()\nassert next(g) == 0\n"
               "assert list(itertools.islice(g, 2)) == [1, 4]"]),
    "gen_for_break_resume": ("generators", S("""
        def fib():
            a, b = 0, 1
            while True:
                yield a
                a, b = b, a + b
        """), ["g = fib()\nfor x in g:\n    if x > 3:\n        break\nassert x == 5\nassert next(g) == 8"]),
    "gen_send": ("generators", S("""
        def running_average():
            total, count, avg = 0.0, 0, None
            while True:
                value = yield avg
                total += value
                count += 1
                avg = total / count
        """), ["g = running_average()\nnext(g)\nassert g.send(10) == 10.0\nassert g.send(20) == 15.0\n"
               "assert g.send(0) == 10.0"]),
    "gen_send_accumulator": ("generators", S("""
        def accumulator():
            total = 0
            while True:
                x = yield total
                if x is None:
                    break
                total += x
        """), ["acc = accumulator()\nassert acc.send(None) == 0\nassert acc.send(5) == 5\nassert acc.send(3) == 8"]),
    "gen_exhausted_stopiteration": ("generators", S("""
        def take_two(items):
            it = iter(items)
            yield next(it)
            yield next(it)
        """), ["g = take_two([1, 2, 3])\nassert next(g) == 1 and next(g) == 2\ntry:\n    next(g)\n"
               "    assert False\nexcept StopIteration:\n    pass", "assert list(take_two('abc')) == ['a', 'b']"]),
    "gen_next_default": ("generators", S("""
        def evens(limit):
            for i in range(0, limit, 2):
                yield i
        """), ["g = evens(3)\nassert next(g) == 0\nassert next(g) == 2\nassert next(g, None) is None"]),
    "gen_type_checks": ("generators", S("""
        def chunks(xs, n):
            for i in range(0, len(xs), n):
                yield xs[i:i + n]
        """), ["import types\nassert isinstance(chunks([1, 2, 3], 2), types.GeneratorType)",
               "import inspect\nassert inspect.isgenerator(chunks([], 1))",
               "assert list(chunks([1, 2, 3, 4, 5], 2)) == [[1, 2], [3, 4], [5]]"]),
    "gen_passed_to_helper": ("generators", S("""
        def countdown(n):
            while n > 0:
                yield n
                n -= 1
        """), ["def first_two(it):\n    return [next(it), next(it)]\ng = countdown(4)\nassert first_two(g) == [4, 3]\n"
               "assert list(g) == [2, 1]"]),
    "gen_zip_two": ("generators", S("""
        def letters():
            for c in 'abc':
                yield c
        def numbers():
            n = 1
            while True:
                yield n
                n += 1
        """), ["assert list(zip(letters(), numbers())) == [('a', 1), ('b', 2), ('c', 3)]",
               "n = numbers()\nlist(zip(letters(), n))\nassert next(n) == 4"]),
    "gen_close_finally": ("generators", S("""
        log = []
        def reader():
            try:
                for i in range(10):
                    yield i
            finally:
                log.append('closed')
        """), ["g = reader()\nnext(g)\ng.close()\nassert log == ['closed']"]),
    "gen_tee_and_takewhile": ("generators", S("""
        def naturals():
            n = 0
            while True:
                yield n
                n += 1
        """), ["from itertools import takewhile\nassert list(takewhile(lambda x: x < 4, naturals())) == [0, 1, 2, 3]",
               "import itertools\na, b = itertools.tee(naturals())\nassert next(a) == 0 and next(a) == 1\n"
               "assert next(b) == 0"]),
    "gen_return_value": ("generators", S("""
        def summing(xs):
            total = 0
            for x in xs:
                total += x
                yield total
            return total
        """), ["def drive(g):\n    result = yield from g\n    return result\n"
               "d = drive(summing([1, 2, 3]))\nassert list(d) == [1, 3, 6]",
               "g = summing([4])\nassert next(g) == 4\ntry:\n    next(g)\nexcept StopIteration as e:\n"
               "    assert e.value == 4"]),
    "gen_method_of_class": ("generators", S("""
        class Tree:
            def __init__(self, value, children=()):
                self.value, self.children = value, list(children)
            def walk(self):
                yield self.value
                for c in self.children:
                    yield from c.walk()
        """), ["t = Tree(1, [Tree(2, [Tree(3)]), Tree(4)])\nw = t.walk()\nassert next(w) == 1\n"
               "assert list(w) == [2, 3, 4]"]),
    # -- context managers
    "cm_with_as": ("context", S("""
        class Timer:
            def __enter__(self):
                self.started = True
                return self
            def __exit__(self, *exc):
                self.stopped = True
                return False
        """), ["with Timer() as t:\n    assert t.started\nassert t.stopped"]),
    "cm_contextlib_yield_value": ("context", S("""
        from contextlib import contextmanager
        @contextmanager
        def opened_list():
            items = []
            yield items
            items.append('done')
        """), ["with opened_list() as xs:\n    xs.append(1)\nassert xs == [1, 'done']"]),
    "cm_enter_returns_other": ("context", S("""
        class Connection:
            def __init__(self):
                self.open = False
            def __enter__(self):
                self.open = True
                return Cursor(self)
            def __exit__(self, *a):
                self.open = False
        class Cursor:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, q):
                return q.upper()
        """), ["c = Connection()\nwith c as cur:\n    assert cur.execute('select') == 'SELECT'\n"
               "    assert c.open\nassert not c.open"]),
    "cm_suppress_own": ("context", S("""
        class ignored:
            def __init__(self, *kinds):
                self.kinds = kinds
            def __enter__(self):
                return self
            def __exit__(self, kind, value, tb):
                return kind is not None and issubclass(kind, self.kinds)
        """), ["with ignored(KeyError):\n    {}['missing']\nassert True",
               "try:\n    with ignored(KeyError):\n        raise ValueError('x')\nexcept ValueError:\n    pass"]),
    "cm_suppress_records": ("context", S("""
        class Catcher:
            def __enter__(self):
                self.caught = None
                return self
            def __exit__(self, kind, value, tb):
                if kind is not None and issubclass(kind, ZeroDivisionError):
                    self.caught = kind.__name__
                    return True
                return False
        """), ["with Catcher() as c:\n    1 / 0\nassert c.caught == 'ZeroDivisionError'"]),
    "cm_exit_sees_exception": ("context", S("""
        class Transaction:
            def __init__(self):
                self.log = []
            def __enter__(self):
                self.log.append('begin')
                return self
            def __exit__(self, kind, value, tb):
                self.log.append('rollback' if kind else 'commit')
                return False
        """), ["t = Transaction()\nwith t:\n    pass\nassert t.log == ['begin', 'commit']",
               "t = Transaction()\ntry:\n    with t:\n        raise RuntimeError('boom')\nexcept RuntimeError:\n"
               "    pass\n"
               "assert t.log == ['begin', 'rollback']"]),
    "cm_exitstack": ("context", S("""
        class Resource:
            closed = []
            def __init__(self, name):
                self.name = name
            def __enter__(self):
                return self
            def __exit__(self, *a):
                Resource.closed.append(self.name)
        """), ["from contextlib import ExitStack\nwith ExitStack() as stack:\n"
               "    rs = [stack.enter_context(Resource(n)) for n in 'ab']\n"
               "    assert [r.name for r in rs] == ['a', 'b']\n"
               "assert Resource.closed == ['b', 'a']"]),
    "cm_reentrant_counter": ("context", S("""
        class Depth:
            def __init__(self):
                self.level = 0
            def __enter__(self):
                self.level += 1
                return self.level
            def __exit__(self, *a):
                self.level -= 1
        """), ["d = Depth()\nwith d as a:\n    with d as b:\n        assert (a, b) == (1, 2)\nassert d.level == 0"]),
    "cm_contextlib_suppress_in_program": ("context", S("""
        import contextlib
        def safe_int(s):
            with contextlib.suppress(ValueError):
                return int(s)
            return None
        """), ["assert safe_int('12') == 12 and safe_int('x') is None"]),
    "cm_redirect_stdout_of_program": ("context", S("""
        def greet(name):
            print(f'hello {name}')
        """), ["import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n    greet('bob')\n"
               "assert buf.getvalue() == 'hello bob\\n'"]),
    "cm_generator_based_state": ("context", S("""
        from contextlib import contextmanager
        class Config:
            def __init__(self):
                self.debug = False
            @contextmanager
            def debugging(self):
                old = self.debug
                self.debug = True
                try:
                    yield self
                finally:
                    self.debug = old
        """), ["c = Config()\nwith c.debugging() as cfg:\n    assert cfg.debug is True\nassert c.debug is False"]),
    "cm_lock_like": ("context", S("""
        import threading
        class Counter:
            def __init__(self):
                self.lock = threading.Lock()
                self.n = 0
            def incr(self):
                with self.lock:
                    self.n += 1
        """), ["c = Counter()\nfor _ in range(5):\n    c.incr()\nassert c.n == 5",
               "c = Counter()\nwith c.lock:\n    assert c.lock.locked()\nassert not c.lock.locked()"]),
    # -- type identity
    "type_is_class": ("type-identity", S("""
        class Point:
            def __init__(self, x, y):
                self.x, self.y = x, y
        def origin():
            return Point(0, 0)
        """), ["assert type(origin()) is Point", "assert type(origin()) == Point"]),
    "type_name": ("type-identity", S("""
        class Cat:
            def speak(self):
                return 'meow'
        class Dog:
            def speak(self):
                return 'woof'
        def make(kind):
            return Cat() if kind == 'cat' else Dog()
        """), ["assert type(make('cat')).__name__ == 'Cat'", "assert make('dog').__class__.__name__ == 'Dog'"]),
    "isinstance_program_class": ("type-identity", S("""
        class Shape:
            pass
        class Circle(Shape):
            def __init__(self, r):
                self.r = r
        def build(r):
            return Circle(r)
        """), ["assert isinstance(build(1), Circle) and isinstance(build(2), Shape)",
               "assert issubclass(Circle, Shape) and not issubclass(Shape, Circle)"]),
    "isinstance_builtin_results": ("type-identity", S("""
        def parse(s):
            return int(s) if s.isdigit() else float(s)
        def split_words(s):
            return tuple(s.split())
        """), ["assert isinstance(parse('3'), int) and isinstance(parse('2.5'), float)",
               "assert type(split_words('a b')) is tuple"]),
    "isinstance_tuple_of_classes": ("type-identity", S("""
        class A: pass
        class B: pass
        class C: pass
        def pick(i):
            return [A, B, C][i]()
        """), ["assert isinstance(pick(0), (A, B)) and not isinstance(pick(2), (A, B))"]),
    "type_of_subclass_is_not_base": ("type-identity", S("""
        class Animal:
            pass
        class Bird(Animal):
            pass
        def hatch():
            return Bird()
        """), ["b = hatch()\nassert type(b) is Bird and type(b) is not Animal and isinstance(b, Animal)"]),
    "class_returned_then_called": ("type-identity", S("""
        class Json:
            ext = 'json'
        class Csv:
            ext = 'csv'
        def parser_for(name):
            return {'a.json': Json, 'b.csv': Csv}[name]
        """), ["assert parser_for('a.json') is Json", "cls = parser_for('b.csv')\nassert cls().ext == 'csv'",
               "assert parser_for('b.csv').__name__ == 'Csv'"]),
    "type_mro_names": ("type-identity", S("""
        class Base: pass
        class Mid(Base): pass
        class Leaf(Mid): pass
        """), ["assert [c.__name__ for c in Leaf.__mro__] == ['Leaf', 'Mid', 'Base', 'object']",
               "assert Leaf.__bases__ == (Mid,)"]),
    "type_in_dict_dispatch": ("type-identity", S("""
        class Add: pass
        class Mul: pass
        def make_op(sym):
            return Add() if sym == '+' else Mul()
        """), ["table = {Add: lambda a, b: a + b, Mul: lambda a, b: a * b}\n"
               "assert table[type(make_op('+'))](2, 3) == 5 and table[type(make_op('*'))](2, 3) == 6"]),
    "singleton_identity": ("type-identity", S("""
        class Registry:
            _instance = None
            def __new__(cls):
                if cls._instance is None:
                    cls._instance = super().__new__(cls)
                return cls._instance
        """), ["assert Registry() is Registry()", "assert type(Registry()) is Registry"]),
    "class_attribute_and_classmethod": ("type-identity", S("""
        class Temperature:
            unit = 'C'
            def __init__(self, deg):
                self.deg = deg
            @classmethod
            def from_f(cls, f):
                return cls((f - 32) * 5 / 9)
        """), ["t = Temperature.from_f(212)\nassert isinstance(t, Temperature) and t.deg == 100.0",
               "assert Temperature.unit == 'C'", "assert type(Temperature.from_f(32)) is Temperature"]),
    "abc_abstract": ("type-identity", S("""
        from abc import ABC, abstractmethod
        class Shape(ABC):
            @abstractmethod
            def area(self): ...
        class Square(Shape):
            def __init__(self, s):
                self.s = s
            def area(self):
                return self.s ** 2
        """), ["assert Square(3).area() == 9 and isinstance(Square(1), Shape)",
               "try:\n    Shape()\n    assert False\nexcept TypeError:\n    pass"]),
    "none_and_bool_identity": ("type-identity", S("""
        def find(xs, x):
            return xs.index(x) if x in xs else None
        def is_even(n):
            return n % 2 == 0
        """), ["assert find([1, 2], 3) is None and find([1, 2], 2) == 1", "assert is_even(4) is True",
               "assert type(is_even(3)) is bool"]),
    "callable_and_hasattr": ("type-identity", S("""
        class Greeter:
            def __init__(self, greeting):
                self.greeting = greeting
            def __call__(self, name):
                return f'{self.greeting}, {name}'
        """), ["g = Greeter('hi')\nassert callable(g) and g('ann') == 'hi, ann'",
               "assert hasattr(Greeter('x'), 'greeting') and not hasattr(Greeter('x'), 'nope')",
               "assert getattr(Greeter('x'), 'missing', 7) == 7"]),
    # -- program objects with plain values: arithmetic, comparison, hashing, sorting
    "eq_with_int": ("plain-values", S("""
        class Money:
            def __init__(self, cents):
                self.cents = cents
            def __eq__(self, other):
                if isinstance(other, Money):
                    return self.cents == other.cents
                return self.cents == other
        """), ["assert Money(5) == 5", "assert 5 == Money(5)", "assert Money(5) != 6"]),
    "radd_with_sum": ("plain-values", S("""
        class Vec:
            def __init__(self, x, y):
                self.x, self.y = x, y
            def __add__(self, o):
                return Vec(self.x + o.x, self.y + o.y)
            def __radd__(self, o):
                return self if o == 0 else self + o
            def __eq__(self, o):
                return (self.x, self.y) == (o.x, o.y)
        """), ["assert sum([Vec(1, 2), Vec(3, 4)]) == Vec(4, 6)"]),
    "add_int_to_object": ("plain-values", S("""
        class Counter:
            def __init__(self, n=0):
                self.n = n
            def __add__(self, k):
                return Counter(self.n + k)
            def __radd__(self, k):
                return Counter(self.n + k)
            def __int__(self):
                return self.n
        """), ["assert int(Counter(2) + 3) == 5", "assert int(1 + Counter(2)) == 3"]),
    "lt_sorted": ("plain-values", S("""
        from functools import total_ordering
        @total_ordering
        class Version:
            def __init__(self, s):
                self.parts = tuple(int(p) for p in s.split('.'))
            def __eq__(self, o):
                return self.parts == o.parts
            def __lt__(self, o):
                return self.parts < o.parts
            def __repr__(self):
                return '.'.join(map(str, self.parts))
        """), ["vs = sorted([Version('1.10'), Version('1.2'), Version('1.9')])\n"
               "assert [repr(v) for v in vs] == ['1.2', '1.9', '1.10']",
               "assert max([Version('2.0'), Version('10.0')]) == Version('10.0')",
               "assert Version('1.0') < Version('1.1') <= Version('1.1')"]),
    "compare_with_number": ("plain-values", S("""
        class Score:
            def __init__(self, v):
                self.v = v
            def __lt__(self, o):
                return self.v < (o.v if isinstance(o, Score) else o)
            def __gt__(self, o):
                return self.v > (o.v if isinstance(o, Score) else o)
        """), ["assert Score(3) > 2 and Score(1) < 2"]),
    "in_list_of_objects": ("plain-values", S("""
        class Tag:
            def __init__(self, name):
                self.name = name
            def __eq__(self, o):
                return isinstance(o, Tag) and self.name == o.name
            def __hash__(self):
                return hash(self.name)
        def tags(*names):
            return [Tag(n) for n in names]
        """), ["assert Tag('a') in tags('a', 'b')", "assert len(set(tags('a', 'a', 'b'))) == 2",
               "d = {Tag('x'): 1}\nassert d[Tag('x')] == 1"]),
    "hash_matches_tuple": ("plain-values", S("""
        class Pair:
            def __init__(self, a, b):
                self.a, self.b = a, b
            def __hash__(self):
                return hash((self.a, self.b))
            def __eq__(self, o):
                return (self.a, self.b) == (o.a, o.b)
        """), ["assert hash(Pair(1, 2)) == hash((1, 2))", "assert hash(Pair(1, 2)) == hash(Pair(1, 2))"]),
    "int_float_conversions": ("plain-values", S("""
        class Celsius:
            def __init__(self, d):
                self.d = d
            def __float__(self):
                return float(self.d)
            def __int__(self):
                return int(self.d)
            def __round__(self, n=0):
                return round(self.d, n)
        """), ["assert float(Celsius(21.5)) == 21.5 and int(Celsius(21.5)) == 21",
               "assert round(Celsius(3.14159), 2) == 3.14"]),
    "str_format_repr": ("plain-values", S("""
        class Point:
            def __init__(self, x, y):
                self.x, self.y = x, y
            def __repr__(self):
                return f'Point({self.x}, {self.y})'
            def __str__(self):
                return f'({self.x}, {self.y})'
        """), ["p = Point(1, 2)\nassert str(p) == '(1, 2)' and repr(p) == 'Point(1, 2)'",
               "assert f'{Point(3, 4)}' == '(3, 4)' and '%s' % Point(0, 0) == '(0, 0)'",
               "assert str([Point(1, 1)]) == '[Point(1, 1)]'"]),
    "mul_by_scalar": ("plain-values", S("""
        class Vector:
            def __init__(self, *xs):
                self.xs = list(xs)
            def __mul__(self, k):
                return Vector(*(x * k for x in self.xs))
            __rmul__ = __mul__
            def __eq__(self, o):
                return self.xs == o.xs
        """), ["assert Vector(1, 2) * 3 == Vector(3, 6)", "assert 2 * Vector(1, 1) == Vector(2, 2)"]),
    "neg_abs_bool": ("plain-values", S("""
        class Amount:
            def __init__(self, v):
                self.v = v
            def __neg__(self):
                return Amount(-self.v)
            def __abs__(self):
                return abs(self.v)
            def __bool__(self):
                return self.v != 0
        """), ["assert abs(-Amount(5)) == 5", "assert not Amount(0) and bool(Amount(2))"]),
    "sum_of_attributes": ("plain-values", S("""
        class Item:
            def __init__(self, name, price):
                self.name, self.price = name, price
        def cart():
            return [Item('a', 2.5), Item('b', 1.5)]
        """), ["assert sum(i.price for i in cart()) == "
               "4.0", "assert sorted(cart(), key=lambda i: i.price)[0].name == 'b'",
               "assert max(cart(), key=lambda i: i.price).name == 'a'"]),
    "index_protocol": ("plain-values", S("""
        class Slot:
            def __init__(self, i):
                self.i = i
            def __index__(self):
                return self.i
        """), ["assert [10, 20, 30][Slot(1)] == 20", "assert bin(Slot(5)) == '0b101'"]),
    "int_subclass_value": ("plain-values", S("""
        class Meters(int):
            def describe(self):
                return f'{int(self)} m'
        def walk(a, b):
            return Meters(a + b)
        """), ["d = walk(2, 3)\n"
               "assert d == 5 and d + 1 == 6 and d.describe() == '5 m'", "assert isinstance(walk(1, 1), int)"]),
    "dict_key_from_program": ("plain-values", S("""
        from enum import Enum
        class Suit(Enum):
            HEARTS = 'h'
            SPADES = 's'
        def count_suits(cards):
            counts = {}
            for c in cards:
                s = Suit(c)
                counts[s] = counts.get(s, 0) + 1
            return counts
        """), ["assert count_suits('hhs') == {Suit.HEARTS: 2, Suit.SPADES: 1}"]),
    "truediv_by_number": ("plain-values", S("""
        class Ratio:
            def __init__(self, n):
                self.n = n
            def __truediv__(self, k):
                return self.n / k
        """), ["assert Ratio(6) / 4 == 1.5"]),
    "max_min_of_objects": ("plain-values", S("""
        class Job:
            def __init__(self, prio):
                self.prio = prio
            def __lt__(self, o):
                return self.prio < o.prio
        def jobs():
            return [Job(3), Job(1), Job(2)]
        """), ["assert max(jobs()).prio == 3 and min(jobs()).prio == 1",
               "import heapq\nh = jobs()\nheapq.heapify(h)\nassert heapq.heappop(h).prio == 1"]),
    # -- records: dataclasses, namedtuples, enums
    "dataclass_eq_repr": ("records", S("""
        from dataclasses import dataclass
        @dataclass
        class Point:
            x: int
            y: int
        def mid(a, b):
            return Point((a.x + b.x) // 2, (a.y + b.y) // 2)
        """), ["assert mid(Point(0, 0), Point(2, 4)) == Point(1, 2)",
               "assert repr(Point(1, 2)) == 'Point(x=1, y=2)'"]),
    "dataclass_asdict": ("records", S("""
        from dataclasses import dataclass, field
        @dataclass
        class Order:
            id: int
            items: list = field(default_factory=list)
        def new_order(i):
            return Order(i, ['pen'])
        """), ["from dataclasses import asdict\nassert asdict(new_order(3)) == {'id': 3, 'items': ['pen']}",
               "import dataclasses\nassert dataclasses.is_dataclass(new_order(1))",
               "import dataclasses\nassert [f.name for f in dataclasses.fields(new_order(1))] == ['id', 'items']"]),
    "dataclass_frozen_order": ("records", S("""
        from dataclasses import dataclass
        @dataclass(frozen=True, order=True)
        class Card:
            rank: int
            suit: str
        """), ["assert sorted([Card(3, 's'), Card(1, 'h')])[0] == Card(1, 'h')",
               "c = Card(2, 'd')\ntry:\n    c.rank = 5\n    assert False\nexcept Exception as e:\n"
               "    assert type(e).__name__ == "
               "'FrozenInstanceError'", "assert len({Card(1, 'h'), Card(1, 'h')}) == 1"]),
    "dataclass_replace": ("records", S("""
        from dataclasses import dataclass
        @dataclass
        class User:
            name: str
            age: int
        """), ["from dataclasses import replace\nu = replace(User('a', 1), age=2)\n"
               "assert u.age == 2 and u.name == 'a'"]),
    "namedtuple_unpack": ("records", S("""
        from collections import namedtuple
        Point = namedtuple('Point', 'x y')
        def swap(p):
            return Point(p.y, p.x)
        """), ["p = swap(Point(1, 2))\nx, y = p\nassert (x, y) == (2, 1) and p == (2, 1)",
               "assert swap(Point(1, 2))._asdict() == {'x': 2, 'y': "
               "1}", "assert isinstance(swap(Point(0, 1)), tuple)"]),
    "typing_namedtuple": ("records", S("""
        from typing import NamedTuple
        class Employee(NamedTuple):
            name: str
            salary: float = 0.0
        def raise_pay(e, pct):
            return e._replace(salary=e.salary * (1 + pct))
        """), ["e = raise_pay(Employee('ann', 100.0), 0.5)\nassert e.salary == 150.0 and e[0] == 'ann'",
               "assert Employee('bo') == ('bo', 0.0)"]),
    "enum_members": ("records", S("""
        from enum import Enum
        class Color(Enum):
            RED = 1
            GREEN = 2
        def complement(c):
            return Color.GREEN if c is Color.RED else Color.RED
        """), ["assert complement(Color.RED) is Color.GREEN", "assert complement(Color.GREEN).name == 'RED'",
               "assert complement(Color.RED).value == 2", "assert list(Color) == [Color.RED, Color.GREEN]"]),
    "enum_compare_to_value": ("records", S("""
        from enum import IntEnum
        class Level(IntEnum):
            LOW = 1
            HIGH = 3
        def level_of(n):
            return Level.HIGH if n > 10 else Level.LOW
        """), ["assert level_of(20) == 3 and level_of(1) < level_of(50)", "assert level_of(5) == Level.LOW"]),
    "enum_from_value": ("records", S("""
        from enum import Enum
        class Status(Enum):
            OK = 'ok'
            FAIL = 'fail'
        def parse(s):
            return Status(s.lower())
        """), ["assert parse('OK') == Status.OK", "assert isinstance(parse('fail'), Status)",
               "try:\n    parse('nope')\n    assert False\nexcept ValueError:\n    pass"]),
    "dataclass_post_init": ("records", S("""
        from dataclasses import dataclass, field
        @dataclass
        class Rect:
            w: float
            h: float
            area: float = field(init=False)
            def __post_init__(self):
                self.area = self.w * self.h
        """), ["assert Rect(2, 3).area == 6", "assert Rect(2, 3) == Rect(2, 3)"]),
    "flag_enum": ("records", S("""
        from enum import Flag, auto
        class Perm(Flag):
            R = auto()
            W = auto()
            X = auto()
        def parse(s):
            p = Perm(0)
            for ch, f in (('r', Perm.R), ('w', Perm.W), ('x', Perm.X)):
                if ch in s:
                    p |= f
            return p
        """), ["assert parse('rw') == Perm.R | Perm.W", "assert Perm.W in parse('rwx')"]),
    "namedtuple_in_list_sorted": ("records", S("""
        from collections import namedtuple
        Student = namedtuple('Student', ['name', 'grade'])
        def top(students, n):
            return sorted(students, key=lambda s: -s.grade)[:n]
        """), ["s = [Student('a', 3), Student('b', 9)]\nassert top(s, 1) == [Student('b', 9)]",
               "assert top([Student('c', 1)], 1)[0].name == 'c'"]),
}

