"""Honest object-heavy programs, continued (``honest_objects`` has the first families): files the test writes or
reads, asyncio, properties, container protocols and exceptions. ``OBJECTS_IO``: name -> (family, solution,
asserts)."""

from __future__ import annotations

from honest_programs import S

OBJECTS_IO: dict[str, tuple[str, str, list[str]]] = {
    # -- files: the test writes what the program reads, or reads what the program wrote
    "file_test_writes_program_reads": ("files", S("""
        def count_lines(path):
            with open(path) as f:
                return sum(1 for _ in f)
        """), ["with open('data.txt', 'w') as f:\n    f.write('a\\nb\\nc\\n')\nassert count_lines('data.txt') == 3"]),
    "file_program_writes_test_reads": ("files", S("""
        def save_csv(path, rows):
            with open(path, 'w') as f:
                for r in rows:
                    f.write(','.join(map(str, r)) + '\\n')
        """), ["save_csv('out.csv', [(1, 2), (3, 4)])\nassert open('out.csv').read() == '1,2\\n3,4\\n'"]),
    "file_tempdir_path": ("files", S("""
        def read_upper(path):
            with open(path) as f:
                return f.read().upper()
        """), ["import os, tempfile\nd = tempfile.mkdtemp()\np = os.path.join(d, 'x.txt')\n"
               "with open(p, 'w') as f:\n    f.write('hi')\nassert read_upper(p) == 'HI'"]),
    "file_json_roundtrip": ("files", S("""
        import json
        def save(path, obj):
            with open(path, 'w') as f:
                json.dump(obj, f)
        def load(path):
            with open(path) as f:
                return json.load(f)
        """), ["import json\nsave('c.json', {'a': [1, 2]})\nwith open('c.json') as f:\n"
               "    assert json.load(f) == {'a': [1, 2]}",
               "with open('d.json', 'w') as f:\n    f.write('[1, 2, 3]')\nassert load('d.json') == [1, 2, 3]"]),
    "file_pathlib": ("files", S("""
        from pathlib import Path
        def word_count(path):
            return len(Path(path).read_text().split())
        """), ["from pathlib import Path\nPath('in.txt').write_text('one two three')\nassert word_count('in.txt') == 3",
               "from pathlib import Path\np = Path('in2.txt')\np.write_text('a b')\nassert word_count(p) == 2"]),
    "file_namedtemporaryfile": ("files", S("""
        def first_line(path):
            with open(path) as f:
                return f.readline().rstrip('\\n')
        """), ["import tempfile\nwith tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False) as t:\n"
               "    t.write('head\\nbody\\n')\nassert first_line(t.name) == 'head'"]),
    "file_program_appends_log": ("files", S("""
        class FileLogger:
            def __init__(self, path):
                self.path = path
            def log(self, msg):
                with open(self.path, 'a') as f:
                    f.write(msg + '\\n')
        """), ["lg = FileLogger('app.log')\nlg.log('start')\nlg.log('stop')\n"
               "assert open('app.log').read().splitlines() == ['start', 'stop']"]),
    "file_copy": ("files", S("""
        import shutil
        def backup(src):
            dst = src + '.bak'
            shutil.copyfile(src, dst)
            return dst
        """), ["open('a.txt', 'w').write('payload')\ndst = backup('a.txt')\nassert open(dst).read() == 'payload'"]),
    "file_list_directory": ("files", S("""
        import os
        def count_ext(folder, ext):
            return sum(1 for n in os.listdir(folder) if n.endswith(ext))
        """), ["import os\nos.makedirs('docs', exist_ok=True)\nfor n in ('a.txt', 'b.txt', 'c.md'):\n"
               "    open(os.path.join('docs', n), 'w').close()\nassert count_ext('docs', '.txt') == 2"]),
    "file_program_owns_its_file": ("files", S("""
        def roundtrip(text):
            with open('tmp.txt', 'w') as f:
                f.write(text)
            with open('tmp.txt') as f:
                return f.read()
        """), ["assert roundtrip('abc') == 'abc'"]),
    # -- asyncio
    "async_run_coroutine": ("asyncio", S("""
        import asyncio
        async def double(x):
            await asyncio.sleep(0)
            return 2 * x
        """), ["import asyncio\nassert asyncio.run(double(21)) == 42"]),
    "async_test_helper_awaits": ("asyncio", S("""
        import asyncio
        async def fetch(i):
            await asyncio.sleep(0.001)
            return {'id': i}
        """), ["import asyncio\nasync def main():\n    a = await fetch(1)\n    b = await fetch(2)\n"
               "    return [a['id'], b['id']]\n"
               "assert asyncio.run(main()) == [1, 2]"]),
    "async_gather": ("asyncio", S("""
        import asyncio
        async def square(x):
            await asyncio.sleep(0.001)
            return x * x
        """), ["import asyncio\nasync def main():\n    return await asyncio.gather(*(square(i) for i in range(4)))\n"
               "assert asyncio.run(main()) == [0, 1, 4, 9]"]),
    "async_generator_async_for": ("asyncio", S("""
        import asyncio
        async def ticker(n):
            for i in range(n):
                await asyncio.sleep(0)
                yield i
        """), ["import asyncio\nasync def collect():\n    return [x async for x in ticker(3)]\n"
               "assert asyncio.run(collect()) == [0, 1, 2]"]),
    "async_method_of_class": ("asyncio", S("""
        import asyncio
        class Cache:
            def __init__(self):
                self.data = {}
            async def set(self, k, v):
                await asyncio.sleep(0)
                self.data[k] = v
            async def get(self, k):
                return self.data.get(k)
        """), ["import asyncio\nc = Cache()\nasyncio.run(c.set('a', 1))\nassert asyncio.run(c.get('a')) == 1",
               "import asyncio\nasync def main():\n    c = Cache()\n    await c.set('k', 5)\n"
               "    return await c.get('k')\n"
               "assert asyncio.run(main()) == 5"]),
    "async_context_manager": ("asyncio", S("""
        class Session:
            def __init__(self):
                self.open = False
            async def __aenter__(self):
                self.open = True
                return self
            async def __aexit__(self, *exc):
                self.open = False
        """), ["import asyncio\nasync def main():\n    s = Session()\n    async with s as t:\n        inside = t.open\n"
               "    return inside, s.open\nassert asyncio.run(main()) == (True, False)"]),
    "async_wait_for": ("asyncio", S("""
        import asyncio
        async def slow_add(a, b):
            await asyncio.sleep(0.01)
            return a + b
        """), ["import asyncio\nasync def main():\n    return await asyncio.wait_for(slow_add(1, 2), timeout=5)\n"
               "assert asyncio.run(main()) == 3"]),
    "async_queue_inside_program": ("asyncio", S("""
        import asyncio
        async def pipeline(items):
            q = asyncio.Queue()
            out = []
            async def producer():
                for x in items:
                    await q.put(x)
                await q.put(None)
            async def consumer():
                while (x := await q.get()) is not None:
                    out.append(x * 10)
            await asyncio.gather(producer(), consumer())
            return out
        """), ["import asyncio\nassert asyncio.run(pipeline([1, 2, 3])) == [10, 20, 30]"]),
    "async_program_awaits_test_coroutine": ("asyncio", S("""
        async def apply_all(fn, xs):
            return [await fn(x) for x in xs]
        """), ["import asyncio\nasync def inc(x):\n    return x + 1\n"
               "assert asyncio.run(apply_all(inc, [1, 2])) == [2, 3]"]),
    "async_iscoroutinefunction": ("asyncio", S("""
        async def job():
            return 'done'
        def plain():
            return 'done'
        """), ["import asyncio\nassert asyncio.iscoroutinefunction(job) and not asyncio.iscoroutinefunction(plain)",
               "import inspect, asyncio\nc = job()\nassert inspect.iscoroutine(c)\nassert asyncio.run(c) == 'done'"]),
    "async_anext": ("asyncio", S("""
        async def countdown(n):
            while n:
                yield n
                n -= 1
        """), ["import asyncio\nasync def main():\n    g = countdown(3)\n"
               "    return [await g.__anext__(), await g.__anext__()]\n"
               "assert asyncio.run(main()) == [3, 2]"]),
    "async_create_task": ("asyncio", S("""
        import asyncio
        async def worker(name, delay):
            await asyncio.sleep(delay)
            return name
        """), ["import asyncio\nasync def main():\n    t1 = asyncio.create_task(worker('a', 0.01))\n"
               "    t2 = asyncio.create_task(worker('b', 0.0))\n    return [await t1, await t2]\n"
               "assert asyncio.run(main()) == ['a', 'b']"]),
    # -- properties and attributes
    "property_read_only": ("properties", S("""
        class Circle:
            def __init__(self, r):
                self._r = r
            @property
            def area(self):
                return 3 * self._r ** 2
        """), ["c = Circle(2)\nassert c.area == 12\ntry:\n    c.area = 5\n    assert False\nexcept AttributeError:\n"
               "    pass"]),
    "property_setter_validates": ("properties", S("""
        class Account:
            def __init__(self):
                self._balance = 0
            @property
            def balance(self):
                return self._balance
            @balance.setter
            def balance(self, v):
                if v < 0:
                    raise ValueError('negative')
                self._balance = v
        """), ["a = Account()\na.balance = 10\nassert a.balance == 10",
               "a = Account()\ntry:\n    a.balance = -1\n    assert False\nexcept ValueError as e:\n"
               "    assert str(e) == 'negative'"]),
    "cached_property": ("properties", S("""
        from functools import cached_property
        class Data:
            calls = 0
            def __init__(self, xs):
                self.xs = xs
            @cached_property
            def total(self):
                Data.calls += 1
                return sum(self.xs)
        """), ["d = Data([1, 2, 3])\nassert d.total == 6 and d.total == 6 and Data.calls == 1"]),
    "property_deleter": ("properties", S("""
        class Box:
            def __init__(self):
                self._v = 1
            @property
            def v(self):
                return self._v
            @v.deleter
            def v(self):
                self._v = None
        """), ["b = Box()\ndel b.v\nassert b.v is None"]),
    "getattr_dynamic": ("properties", S("""
        class Config:
            def __init__(self, **kw):
                self._data = kw
            def __getattr__(self, name):
                try:
                    return self._data[name]
                except KeyError:
                    raise AttributeError(name)
        """), ["c = Config(host='x', port=80)\nassert c.host == 'x' and c.port == 80",
               "assert getattr(Config(), 'missing', None) is None"]),
    "slots_class": ("properties", S("""
        class P:
            __slots__ = ('x', 'y')
            def __init__(self, x, y):
                self.x, self.y = x, y
        """), ["p = P(1, 2)\np.x = 5\nassert (p.x, p.y) == (5, 2)\ntry:\n    p.z = 1\n    assert False\n"
               "except AttributeError:\n    pass"]),
    "vars_and_dict": ("properties", S("""
        class Rec:
            def __init__(self, a, b):
                self.a, self.b = a, b
        """), ["assert vars(Rec(1, 2)) == {'a': 1, 'b': 2}", "assert Rec(3, 4).__dict__ == {'a': 3, 'b': 4}"]),
    "setattr_from_test": ("properties", S("""
        class Node:
            def __init__(self, val):
                self.val, self.next = val, None
        def length(head):
            n = 0
            while head:
                n, head = n + 1, head.next
            return n
        """), ["a = Node(1)\na.next = Node(2)\na.next.next = Node(3)\nassert length(a) == 3",
               "a = Node(1)\nsetattr(a, 'next', Node(2))\nassert a.next.val == 2"]),
    "method_named_like_proxy_internals": ("properties", S("""
        class Factory:
            def __init__(self):
                self.made = 0
            def make(self, kind):
                self.made += 1
                return kind.upper()
        """), ["f = Factory()\nassert f.make('car') == 'CAR' and f.made == 1"]),
    # -- container protocols
    "sequence_protocol": ("containers", S("""
        class Deck:
            def __init__(self):
                self.cards = [f'{r}{s}' for s in 'HS' for r in 'A23']
            def __len__(self):
                return len(self.cards)
            def __getitem__(self, i):
                return self.cards[i]
        """), ["d = Deck()\nassert len(d) == 6 and d[0] == 'AH' and d[-1] == '3S'",
               "assert Deck()[1:3] == ['2H', '3H']", "assert list(Deck())[:2] == ['AH', '2H']",
               "assert '3S' in Deck()"]),
    "iter_protocol": ("containers", S("""
        class Range2:
            def __init__(self, n):
                self.n = n
            def __iter__(self):
                i = 0
                while i < self.n:
                    yield i
                    i += 2
        """), ["assert list(Range2(7)) == [0, 2, 4, 6]", "assert sum(Range2(5)) == 6", "assert 4 in Range2(6)",
               "assert sorted(Range2(5), reverse=True) == [4, 2, 0]"]),
    "contains_only": ("containers", S("""
        class Interval:
            def __init__(self, lo, hi):
                self.lo, self.hi = lo, hi
            def __contains__(self, x):
                return self.lo <= x <= self.hi
        """), ["assert 5 in Interval(1, 10) and 11 not in Interval(1, 10)"]),
    "iterator_class": ("containers", S("""
        class CountDown:
            def __init__(self, n):
                self.n = n
            def __iter__(self):
                return self
            def __next__(self):
                if self.n <= 0:
                    raise StopIteration
                self.n -= 1
                return self.n + 1
        """), ["c = CountDown(4)\nassert next(c) == 4\nassert list(c) == [3, 2, 1]",
               "c = CountDown(5)\nfor x in c:\n    if x == 4:\n        break\nassert next(c) == 3"]),
    "mapping_abc": ("containers", S("""
        from collections.abc import Mapping
        class Frozen(Mapping):
            def __init__(self, **kw):
                self._d = dict(kw)
            def __getitem__(self, k):
                return self._d[k]
            def __iter__(self):
                return iter(self._d)
            def __len__(self):
                return len(self._d)
        """), ["f = Frozen(a=1, b=2)\nassert dict(f) == {'a': 1, 'b': 2} and f['a'] == 1",
               "assert sorted(Frozen(x=1).keys()) == ['x'] and Frozen(x=1).get('y', 0) == 0",
               "from collections.abc import Mapping\nassert isinstance(Frozen(), Mapping)"]),
    "setitem_delitem": ("containers", S("""
        class Registry:
            def __init__(self):
                self._d = {}
            def __setitem__(self, k, v):
                self._d[k.lower()] = v
            def __getitem__(self, k):
                return self._d[k.lower()]
            def __delitem__(self, k):
                del self._d[k.lower()]
            def __len__(self):
                return len(self._d)
        """), ["r = Registry()\nr['A'] = 1\nassert r['a'] == 1 and len(r) == 1\ndel r['a']\nassert len(r) == 0"]),
    "list_subclass": ("containers", S("""
        class Stack(list):
            def push(self, x):
                self.append(x)
            def peek(self):
                return self[-1]
        """), ["s = Stack()\ns.push(1)\ns.push(2)\nassert s.peek() == 2 and s == [1, 2] and len(s) == 2",
               "assert isinstance(Stack(), list)"]),
    "reversed_protocol": ("containers", S("""
        class Line:
            def __init__(self, *xs):
                self.xs = xs
            def __iter__(self):
                return iter(self.xs)
            def __reversed__(self):
                return iter(self.xs[::-1])
        """), ["assert list(reversed(Line(1, 2, 3))) == [3, 2, 1]"]),
    "falsy_when_empty": ("containers", S("""
        class Bag:
            def __init__(self):
                self.items = []
            def __len__(self):
                return len(self.items)
            def add(self, x):
                self.items.append(x)
        """), ["b = Bag()\nassert not b\nb.add(1)\nassert b and len(b) == 1"]),
    "matrix_tuple_index": ("containers", S("""
        class Matrix:
            def __init__(self, rows):
                self.rows = rows
            def __getitem__(self, ij):
                i, j = ij
                return self.rows[i][j]
        """), ["m = Matrix([[1, 2], [3, 4]])\nassert m[1, 0] == 3 and m[0, 1] == 2"]),
    "linked_list_iter_len": ("containers", S("""
        class LinkedList:
            class _Node:
                def __init__(self, v, nxt=None):
                    self.v, self.nxt = v, nxt
            def __init__(self, xs=()):
                self.head, self.n = None, 0
                for x in reversed(list(xs)):
                    self.head = self._Node(x, self.head)
                    self.n += 1
            def __iter__(self):
                node = self.head
                while node:
                    yield node.v
                    node = node.nxt
            def __len__(self):
                return self.n
        """), ["ll = LinkedList([3, 1, 2])\nassert list(ll) == [3, 1, 2] and len(ll) == 3",
               "assert sorted(LinkedList([3, 1, 2])) == [1, 2, 3]", "assert max(LinkedList([5, 9, 1])) == 9"]),
    "getitem_only_iteration": ("containers", S("""
        class Squares:
            def __getitem__(self, i):
                if i >= 4:
                    raise IndexError
                return i * i
        """), ["assert list(Squares()) == [0, 1, 4, 9]", "assert 9 in Squares()"]),
    # -- exceptions raised by the program, caught by the test
    "custom_exception_class": ("exceptions", S("""
        class InsufficientFunds(Exception):
            pass
        def withdraw(balance, amount):
            if amount > balance:
                raise InsufficientFunds(f'need {amount - balance} more')
            return balance - amount
        """), ["try:\n    withdraw(10, 15)\n    assert False\nexcept InsufficientFunds as e:\n"
               "    assert str(e) == 'need 5 more'",
               "assert withdraw(10, 3) == 7"]),
    "exception_attributes": ("exceptions", S("""
        class ParseError(ValueError):
            def __init__(self, line, msg):
                super().__init__(msg)
                self.line = line
        def parse(text):
            for i, ln in enumerate(text.splitlines(), 1):
                if not ln.isdigit():
                    raise ParseError(i, f'bad line {i}')
            return [int(x) for x in text.splitlines()]
        """), ["try:\n    parse('1\\nx')\nexcept ParseError as e:\n"
               "    assert e.line == 2 and e.args == ('bad line 2',)",
               "try:\n    parse('a')\nexcept ValueError:\n    pass\nelse:\n    assert False"]),
    "exception_hierarchy": ("exceptions", S("""
        class AppError(Exception): pass
        class NotFound(AppError): pass
        class Forbidden(AppError): pass
        def get(path):
            if path == '/secret':
                raise Forbidden(path)
            raise NotFound(path)
        """), ["try:\n    get('/x')\nexcept AppError as e:\n"
               "    assert isinstance(e, NotFound) and not isinstance(e, Forbidden)",
               "assert issubclass(NotFound, AppError)"]),
    "raises_helper": ("exceptions", S("""
        def divide(a, b):
            if b == 0:
                raise ZeroDivisionError('division by zero')
            return a / b
        """), ["class raises:\n    def __init__(self, kind):\n        self.kind = kind\n    def __enter__(self):\n"
               "        return self\n"
               "    def __exit__(self, t, v, tb):\n        assert t is not None and issubclass(t, self.kind)\n"
               "        self.value = v\n"
               "        return True\nwith raises(ZeroDivisionError) as r:\n    divide(1, 0)\n"
               "assert 'zero' in str(r.value)"]),
    "exception_type_identity": ("exceptions", S("""
        class Timeout(Exception): pass
        def call():
            raise Timeout('slow')
        """), ["try:\n    call()\nexcept Exception as e:\n"
               "    assert type(e) is Timeout and type(e).__name__ == 'Timeout'"]),
    "exception_chaining": ("exceptions", S("""
        class ConfigError(Exception): pass
        def load(s):
            try:
                return int(s)
            except ValueError as e:
                raise ConfigError('bad config') from e
        """), ["try:\n    load('x')\nexcept ConfigError as e:\n    assert isinstance(e.__cause__, ValueError)"]),
    "program_catches_test_callback_error": ("exceptions", S("""
        def safe_map(fn, xs):
            out = []
            for x in xs:
                try:
                    out.append(fn(x))
                except ValueError:
                    out.append(None)
            return out
        """), ["def f(x):\n    if x < 0:\n        raise ValueError(x)\n    return x * 2\n"
               "assert safe_map(f, [1, -1, 2]) == [2, None, 4]"]),
    "keyerror_from_container": ("exceptions", S("""
        class Inventory:
            def __init__(self):
                self.stock = {'apple': 3}
            def take(self, item):
                if self.stock.get(item, 0) == 0:
                    raise KeyError(item)
                self.stock[item] -= 1
        """), ["inv = Inventory()\ninv.take('apple')\ntry:\n    inv.take('pear')\nexcept KeyError as e:\n"
               "    assert e.args[0] == 'pear'"]),
    "exception_raised_in_generator": ("exceptions", S("""
        class Empty(Exception): pass
        def items(xs):
            if not xs:
                raise Empty('nothing')
            yield from xs
        """), ["try:\n    list(items([]))\n    assert False\nexcept Empty:\n"
               "    pass", "assert list(items([1])) == [1]"]),
    "stopiteration_subclass_safe": ("exceptions", S("""
        class ValidationError(Exception):
            def __init__(self, errors):
                super().__init__(f'{len(errors)} errors')
                self.errors = errors
        def validate(d):
            errs = [k for k, v in d.items() if v is None]
            if errs:
                raise ValidationError(errs)
            return True
        """), ["try:\n    validate({'a': None, 'b': 1})\nexcept ValidationError as e:\n"
               "    assert e.errors == ['a'] and str(e) == '1 errors'",
               "assert validate({'a': 1})"]),
}
