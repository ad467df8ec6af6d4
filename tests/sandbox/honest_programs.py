"""Correct solutions of the kind a model writes, each with its tests: every one must earn the full code reward.

``MBPP``: name -> (solution, asserts[, setup]). ``HUMANEVAL``: name -> (prompt, completion, test, entry_point).
They cover the standard library broadly, classes used from the tests, threads and process pools, numpy,
``__main__`` guards, big output, deep recursion and unicode.
"""

from __future__ import annotations

import textwrap


def S(text: str) -> str:
    """A code block written indented in this file."""
    return textwrap.dedent(text).strip("\n")


MBPP: dict[str, tuple] = {
    "glob": (
        S("""
        import glob
        def count_txt(n):
            for i in range(n):
                with open(f'f{i}.txt', 'w') as fh:
                    fh.write('x')
            return len(glob.glob('f*.txt'))
        """),
        [
            'assert count_txt(3) == 3',
            'assert count_txt(5) == 5',
        ],
    ),
    "unicodedata": (
        S("""
        import unicodedata
        def name_of(ch):
            return unicodedata.name(ch)
        def nfc_len(s):
            return len(unicodedata.normalize('NFC', s))
        """),
        [
            "assert name_of('é') == 'LATIN SMALL LETTER E WITH ACUTE'",
            S("""
            assert nfc_len('e\\u0301') == 1
            """),
        ],
    ),
    "calendar": (
        S("""
        import calendar
        def days_in(y, m):
            return calendar.monthrange(y, m)[1]
        """),
        [
            'assert days_in(2024, 2) == 29',
            'assert days_in(2023, 2) == 28',
            'assert days_in(2024, 12) == 31',
        ],
    ),
    "csv": (
        S("""
        import csv, io
        def parse(text):
            return list(csv.reader(io.StringIO(text)))
        def dump(rows):
            buf = io.StringIO()
            csv.writer(buf, lineterminator='\\n').writerows(rows)
            return buf.getvalue()
        """),
        [
            S("""
            assert parse('a,"b,c"\\n1,2') == [['a', 'b,c'], ['1', '2']]
            """),
            S("""
            assert dump([[1, 'x y']]) == '1,x y\\n'
            """),
        ],
    ),
    "pathlib": (
        S("""
        from pathlib import Path, PurePosixPath
        def roundtrip(text):
            p = Path('note.txt')
            p.write_text(text)
            return p.read_text()
        def suffixes(name):
            return PurePosixPath(name).suffixes
        """),
        [
            "assert roundtrip('hi') == 'hi'",
            "assert suffixes('a.tar.gz') == ['.tar', '.gz']",
        ],
    ),
    "queue": (
        S("""
        import queue
        def by_priority(items):
            q = queue.PriorityQueue()
            for p, v in items:
                q.put((p, v))
            return [q.get()[1] for _ in range(q.qsize())]
        """),
        [
            "assert by_priority([(3, 'c'), (1, 'a'), (2, 'b')]) == ['a', 'b', 'c']",
        ],
    ),
    "difflib": (
        S("""
        import difflib
        def similarity(a, b):
            return round(difflib.SequenceMatcher(None, a, b).ratio(), 2)
        def closest(word, words):
            return difflib.get_close_matches(word, words, n=1)[0]
        """),
        [
            "assert similarity('abcd', 'abce') == 0.75",
            "assert closest('appel', ['ape', 'apple', 'peach']) == 'apple'",
        ],
    ),
    "pprint": (
        S("""
        import pprint
        def fmt(obj):
            return pprint.pformat(obj)
        """),
        [
            S("""
            assert fmt({'b': 1, 'a': [1, 2]}) == "{'a': [1, 2], 'b': 1}"
            """),
        ],
    ),
    "base64": (
        S("""
        import base64
        def enc(s):
            return base64.b64encode(s.encode()).decode()
        def dec(s):
            return base64.b64decode(s).decode()
        """),
        [
            "assert enc('hi') == 'aGk='",
            "assert dec('aGk=') == 'hi'",
        ],
    ),
    "binascii": (
        S("""
        import binascii
        def crc(s):
            return binascii.crc32(s.encode())
        def hexlify(b):
            return binascii.hexlify(b).decode()
        """),
        [
            "assert crc('hello') == 907060870",
            S("""
            assert hexlify(b'\\x01\\xff') == '01ff'
            """),
        ],
    ),
    "secrets": (
        S("""
        import secrets
        def token_len(n):
            return len(secrets.token_hex(n))
        """),
        [
            'assert token_len(8) == 16',
            'assert token_len(1) == 2',
        ],
    ),
    "uuid": (
        S("""
        import uuid
        def parse(s):
            return uuid.UUID(s)
        def fresh_version():
            return uuid.uuid4().version
        """),
        [
            S("""
            import uuid
            assert parse('12345678123456781234567812345678') == uuid.UUID('12345678-1234-5678-1234-567812345678')
            """),
            'assert fresh_version() == 4',
        ],
    ),
    "argparse": (
        S("""
        import argparse
        def parse(argv):
            p = argparse.ArgumentParser()
            p.add_argument('--n', type=int, default=1)
            p.add_argument('names', nargs='*')
            a = p.parse_args(argv)
            return a.n, a.names
        """),
        [
            "assert parse(['--n', '3', 'x', 'y']) == (3, ['x', 'y'])",
            'assert parse([]) == (1, [])',
        ],
    ),
    "sqlite3": (
        S("""
        import sqlite3
        def total_by_user(rows):
            db = sqlite3.connect(':memory:')
            db.execute('create table t (user text, amount int)')
            db.executemany('insert into t values (?, ?)', rows)
            return dict(db.execute('select user, sum(amount) from t group by user order by user'))
        """),
        [
            "assert total_by_user([('a', 1), ('b', 2), ('a', 3)]) == {'a': 4, 'b': 2}",
        ],
    ),
    "xml": (
        S("""
        import xml.etree.ElementTree as ET
        def prices(doc):
            root = ET.fromstring(doc)
            return sum(float(i.get('price')) for i in root.iter('item'))
        """),
        [
            S("""
            assert prices('<r><item price="1.5"/><item price="2"/></r>') == 3.5
            """),
        ],
    ),
    "html": (
        S("""
        import html
        from html.parser import HTMLParser
        def safe(s):
            return html.escape(s)
        def links(doc):
            found = []
            class P(HTMLParser):
                def handle_starttag(self, tag, attrs):
                    if tag == 'a':
                        found.append(dict(attrs)['href'])
            P().feed(doc)
            return found
        """),
        [
            "assert safe('<a&b>') == '&lt;a&amp;b&gt;'",
            S("""
            assert links('<p><a href="x">1</a><a href="y">2</a></p>') == ['x', 'y']
            """),
        ],
    ),
    "urllib_parse": (
        S("""
        from urllib.parse import urlparse, parse_qs
        def host(url):
            return urlparse(url).netloc
        def query(url):
            return parse_qs(urlparse(url).query)
        """),
        [
            "assert host('https://example.com/a?b=1') == 'example.com'",
            "assert query('http://x/?a=1&a=2&b=3') == {'a': ['1', '2'], 'b': ['3']}",
        ],
    ),
    "email": (
        S("""
        import email
        from email.utils import parseaddr
        def subject(raw):
            return email.message_from_string(raw)['Subject']
        def address(s):
            return parseaddr(s)[1]
        """),
        [
            S("""
            assert subject('Subject: Hello\\n\\nbody') == 'Hello'
            """),
            "assert address('Ann <ann@example.com>') == 'ann@example.com'",
        ],
    ),
    "pickle": (
        S("""
        import pickle
        class Box:
            def __init__(self, v):
                self.v = v
        def roundtrip(v):
            return pickle.loads(pickle.dumps(Box(v))).v
        """),
        [
            "assert roundtrip([1, {'a': 2}]) == [1, {'a': 2}]",
        ],
    ),
    "graphlib": (
        S("""
        from graphlib import TopologicalSorter
        def order(graph):
            return list(TopologicalSorter(graph).static_order())
        """),
        [
            "assert order({'b': {'a'}, 'c': {'b'}}) == ['a', 'b', 'c']",
        ],
    ),
    "zoneinfo": (
        S("""
        from datetime import datetime
        from zoneinfo import ZoneInfo
        def tokyo_hour(h):
            t = datetime(2024, 1, 1, h, tzinfo=ZoneInfo('UTC'))
            return t.astimezone(ZoneInfo('Asia/Tokyo')).hour
        """),
        [
            'assert tokyo_hour(12) == 21',
            'assert tokyo_hour(0) == 9',
        ],
    ),
    "ipaddress": (
        S("""
        import ipaddress
        def size(net):
            return ipaddress.ip_network(net).num_addresses
        def private(a):
            return ipaddress.ip_address(a).is_private
        """),
        [
            "assert size('10.0.0.0/30') == 4",
            "assert private('192.168.1.1')",
            "assert not private('8.8.8.8')",
        ],
    ),
    "colorsys": (
        S("""
        import colorsys
        def hue(r, g, b):
            return round(colorsys.rgb_to_hsv(r, g, b)[0] * 360)
        """),
        [
            'assert hue(1, 0, 0) == 0',
            'assert hue(0, 1, 0) == 120',
            'assert hue(0, 0, 1) == 240',
        ],
    ),
    "shlex": (
        S("""
        import shlex
        def words(cmd):
            return shlex.split(cmd)
        def quote(s):
            return shlex.quote(s)
        """),
        [
            S("""
            assert words('a "b c" d') == ['a', 'b c', 'd']
            """),
            S("""
            assert quote('a b') == "'a b'"
            """),
        ],
    ),
    "asyncio": (
        S("""
        import asyncio
        async def double(x):
            await asyncio.sleep(0.001)
            return 2 * x
        def doubled(xs):
            async def main():
                return await asyncio.gather(*(double(x) for x in xs))
            return asyncio.run(main())
        """),
        [
            'assert doubled([1, 2, 3]) == [2, 4, 6]',
        ],
    ),
    "socket_constants": (
        S("""
        import socket
        def family():
            return int(socket.AF_INET)
        def packed(ip):
            return socket.inet_aton(ip)
        def net_order(n):
            return socket.htons(n)
        """),
        [
            'assert family() == 2',
            S("""
            assert packed('1.2.3.4') == b'\\x01\\x02\\x03\\x04'
            """),
            'assert net_order(1) == 256',
        ],
    ),
    "hashlib_struct": (
        S("""
        import hashlib, struct
        def sha(s):
            return hashlib.sha256(s.encode()).hexdigest()[:8]
        def pack(a, b):
            return struct.unpack('<HH', struct.pack('<HH', a, b))
        """),
        [
            "assert sha('abc') == 'ba7816bf'",
            'assert pack(1, 2) == (1, 2)',
        ],
    ),
    "tempfile_json": (
        S("""
        import json, os, tempfile
        def store(obj):
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, 'x.json')
                with open(path, 'w') as f:
                    json.dump(obj, f)
                with open(path) as f:
                    return json.load(f)
        """),
        [
            "assert store({'a': [1, 2]}) == {'a': [1, 2]}",
        ],
    ),
    "textwrap_string": (
        S("""
        import string, textwrap
        def wrap(s, w):
            return textwrap.wrap(s, w)
        def letters(n):
            return string.ascii_lowercase[:n]
        """),
        [
            "assert wrap('aaa bbb ccc', 7) == ['aaa bbb', 'ccc']",
            "assert letters(3) == 'abc'",
        ],
    ),
    "stdlib_values": (
        S("""
        from collections import Counter, OrderedDict, defaultdict, deque
        from fractions import Fraction
        from decimal import Decimal
        import datetime
        def counts(s):
            return Counter(s)
        def grouped(words):
            d = defaultdict(list)
            for w in words:
                d[len(w)].append(w)
            return d
        def last(xs, n):
            return deque(xs, maxlen=n)
        def half():
            return Fraction(1, 2)
        def money():
            return Decimal('1.10') + Decimal('2.20')
        def day():
            return datetime.date(2024, 2, 28) + datetime.timedelta(days=1)
        def ordered():
            return OrderedDict([('b', 1), ('a', 2)])
        """),
        [
            "assert counts('abca') == {'a': 2, 'b': 1, 'c': 1}",
            "assert counts('aab').most_common(1) == [('a', 2)]",
            "assert grouped(['a', 'bb', 'c']) == {1: ['a', 'c'], 2: ['bb']}",
            'assert list(last([1, 2, 3, 4], 2)) == [3, 4]',
            'assert half() == 0.5',
            S("""
            from decimal import Decimal
            assert money() == Decimal('3.30')
            """),
            S("""
            import datetime
            assert day() == datetime.date(2024, 2, 29)
            """),
            "assert list(ordered().keys()) == ['b', 'a']",
        ],
    ),
    "builtin_values": (
        S("""
        def stats(xs):
            return {'min': min(xs), 'max': max(xs)}, set(xs), frozenset(xs), tuple(xs)
        def raw():
            return b'\\x00ab', bytearray(b'xy'), 3 + 4j, range(3), None
        def keys(d):
            return d.keys()
        def big():
            return 2 ** 200
        """),
        [
            "assert stats([3, 1, 3]) == ({'min': 1, 'max': 3}, {1, 3}, frozenset({1, 3}), (3, 1, 3))",
            S("""
            assert raw() == (b'\\x00ab', bytearray(b'xy'), 3 + 4j, range(3), None)
            """),
            "assert keys({'a': 1, 'b': 2}) == {'a', 'b'}",
            'assert big() % 1000 == 376',
        ],
    ),
    "typing_future": (
        S("""
        from __future__ import annotations
        from typing import Dict, List, Optional
        def index(words: List[str]) -> Dict[str, int]:
            return {w: i for i, w in enumerate(words)}
        def first(xs: List[int]) -> Optional[int]:
            return xs[0] if xs else None
        """),
        [
            "assert index(['a', 'b']) == {'a': 0, 'b': 1}",
            'assert first([]) is None',
            'assert first([7]) == 7',
        ],
    ),
    "leetcode_solution": (
        S("""
        from typing import List
        class Solution:
            def twoSum(self, nums: List[int], target: int) -> List[int]:
                seen = {}
                for i, x in enumerate(nums):
                    if target - x in seen:
                        return [seen[target - x], i]
                    seen[x] = i
                return []
        """),
        [
            'assert Solution().twoSum([2, 7], 9) == [0, 1]',
            'assert Solution().twoSum([3, 2, 4], 6) == [1, 2]',
            S("""
            s = Solution()
            assert isinstance(s, Solution)
            assert s.twoSum([1, 5, 5], 10) == [1, 2]
            """),
        ],
    ),
    "lru_cache_class": (
        S("""
        from collections import OrderedDict
        class LRUCache:
            def __init__(self, capacity):
                self.cap = capacity
                self.d = OrderedDict()
            def get(self, key):
                if key not in self.d:
                    return -1
                self.d.move_to_end(key)
                return self.d[key]
            def put(self, key, value):
                self.d[key] = value
                self.d.move_to_end(key)
                if len(self.d) > self.cap:
                    self.d.popitem(last=False)
        """),
        [
            S("""
            c = LRUCache(2)
            c.put(1, 1)
            c.put(2, 2)
            assert c.get(1) == 1
            c.put(3, 3)
            assert c.get(2) == -1
            assert c.get(3) == 3
            """),
        ],
    ),
    "min_stack": (
        S("""
        class MinStack:
            def __init__(self):
                self.items = []
            def push(self, x):
                self.items.append((x, min(x, self.items[-1][1]) if self.items else x))
            def pop(self):
                return self.items.pop()[0]
            def get_min(self):
                return self.items[-1][1]
            def __len__(self):
                return len(self.items)
        """),
        [
            S("""
            s = MinStack()
            for x in (5, 2, 7):
                s.push(x)
            assert s.get_min() == 2
            assert s.pop() == 7
            assert len(s) == 2
            assert s.get_min() == 2
            """),
        ],
    ),
    "trie": (
        S("""
        class Trie:
            def __init__(self):
                self.root = {}
            def insert(self, w):
                n = self.root
                for c in w:
                    n = n.setdefault(c, {})
                n['$'] = True
            def search(self, w):
                n = self._walk(w)
                return n is not None and '$' in n
            def starts_with(self, p):
                return self._walk(p) is not None
            def _walk(self, s):
                n = self.root
                for c in s:
                    if c not in n:
                        return None
                    n = n[c]
                return n
        """),
        [
            S("""
            t = Trie()
            t.insert('apple')
            assert t.search('apple')
            assert not t.search('app')
            assert t.starts_with('app')
            """),
        ],
    ),
    "linked_list": (
        S("""
        class ListNode:
            def __init__(self, val=0, next=None):
                self.val = val
                self.next = next
        def reverse(head):
            prev = None
            while head:
                head.next, prev, head = prev, head, head.next
            return prev
        """),
        [
            S("""
            def build(xs):
                head = None
                for x in reversed(xs):
                    head = ListNode(x, head)
                return head
            def to_list(node):
                out = []
                while node:
                    out.append(node.val)
                    node = node.next
                return out
            assert to_list(reverse(build([1, 2, 3]))) == [3, 2, 1]
            assert reverse(None) is None
            """),
        ],
    ),
    "tree_from_setup": (
        S("""
        def max_depth(root):
            if root is None:
                return 0
            return 1 + max(max_depth(root.left), max_depth(root.right))
        def invert(root):
            if root:
                root.left, root.right = invert(root.right), invert(root.left)
            return root
        """),
        [
            'assert max_depth(TreeNode(1, TreeNode(2, TreeNode(3)), TreeNode(4))) == 3',
            'assert invert(TreeNode(1, TreeNode(2), TreeNode(3))) == TreeNode(1, TreeNode(3), TreeNode(2))',
        ],
        S("""
        class TreeNode:
            def __init__(self, val=0, left=None, right=None):
                self.val, self.left, self.right = val, left, right
            def __eq__(self, other):
                mine, theirs = (self.val, self.left, self.right), (other.val, other.left, other.right)
                return isinstance(other, TreeNode) and mine == theirs
        """),
    ),
    "dataclasses": (
        S("""
        from dataclasses import dataclass, field
        @dataclass(frozen=True, order=True)
        class Point:
            x: int
            y: int
        def midpoint(a, b):
            return Point((a.x + b.x) // 2, (a.y + b.y) // 2)
        @dataclass
        class Bag:
            items: list = field(default_factory=list)
            def add(self, x):
                self.items.append(x)
                return self
        """),
        [
            'assert midpoint(Point(0, 0), Point(4, 2)) == Point(2, 1)',
            'assert sorted([Point(2, 1), Point(1, 5)]) == [Point(1, 5), Point(2, 1)]',
            "assert Point(1, 2).x == 1 and repr(Point(1, 2)) == 'Point(x=1, y=2)'",
            'assert Bag().add(1).add(2).items == [1, 2]',
            'assert hash(Point(1, 2)) == hash(Point(1, 2))',
        ],
    ),
    "operators_class": (
        S("""
        class Vector:
            def __init__(self, x, y):
                self.x, self.y = x, y
            def __add__(self, o):
                return Vector(self.x + o.x, self.y + o.y)
            def __eq__(self, o):
                return isinstance(o, Vector) and (self.x, self.y) == (o.x, o.y)
            def __abs__(self):
                return (self.x ** 2 + self.y ** 2) ** 0.5
            def __repr__(self):
                return f'Vector({self.x}, {self.y})'
            def __iter__(self):
                return iter((self.x, self.y))
        """),
        [
            'assert Vector(1, 2) + Vector(3, 4) == Vector(4, 6)',
            'assert abs(Vector(3, 4)) == 5.0',
            "assert str(Vector(1, 2)) == 'Vector(1, 2)'",
            'assert tuple(Vector(5, 6)) == (5, 6)',
            'assert Vector(1, 2) != Vector(2, 1)',
        ],
    ),
    "custom_exception": (
        S("""
        class InsufficientFunds(Exception):
            pass
        class Account:
            def __init__(self, balance):
                self.balance = balance
            def withdraw(self, amount):
                if amount > self.balance:
                    raise InsufficientFunds('not enough')
                self.balance -= amount
                return self.balance
        """),
        [
            S("""
            a = Account(10)
            assert a.withdraw(3) == 7
            try:
                a.withdraw(100)
                assert False
            except InsufficientFunds as e:
                assert str(e) == 'not enough'
            assert a.balance == 7
            """),
            S("""
            try:
                Account(0).withdraw(1)
            except Exception as e:
                assert isinstance(e, InsufficientFunds)
            """),
        ],
    ),
    "builtin_exception": (
        S("""
        def parse_positive(s):
            n = int(s)
            if n <= 0:
                raise ValueError('must be positive')
            return n
        def lookup(d, k):
            return d[k]
        """),
        [
            "assert parse_positive('5') == 5",
            S("""
            try:
                parse_positive('-1')
                raise AssertionError('no error')
            except ValueError as e:
                assert 'positive' in str(e)
            """),
            S("""
            try:
                lookup({}, 'x')
            except KeyError:
                pass
            else:
                assert False
            """),
        ],
    ),
    "iterator_class": (
        S("""
        class Countdown:
            def __init__(self, n):
                self.n = n
            def __iter__(self):
                return self
            def __next__(self):
                if self.n < 0:
                    raise StopIteration
                self.n -= 1
                return self.n + 1
        """),
        [
            'assert list(Countdown(3)) == [3, 2, 1, 0]',
            'assert sum(Countdown(10)) == 55',
            'assert 2 in Countdown(5)',
            S("""
            c = Countdown(2)
            assert next(c) == 2
            assert next(c) == 1
            """),
        ],
    ),
    "generators": (
        S("""
        import itertools
        def fib():
            a, b = 0, 1
            while True:
                yield a
                a, b = b, a + b
        def evens(n):
            return (x for x in range(n) if x % 2 == 0)
        """),
        [
            S("""
            import itertools
            assert list(itertools.islice(fib(), 10)) == [0, 1, 1, 2, 3, 5, 8, 13, 21, 34]
            """),
            'assert list(evens(7)) == [0, 2, 4, 6]',
            S("""
            g = fib()
            assert [next(g) for _ in range(4)] == [0, 1, 1, 2]
            """),
            'assert sum(evens(10 ** 4)) == 24995000',
        ],
    ),
    "context_manager": (
        S("""
        import time
        class Timer:
            def __enter__(self):
                self.start = time.perf_counter()
                return self
            def __exit__(self, *exc):
                self.elapsed = time.perf_counter() - self.start
                return False
        """),
        [
            S("""
            with Timer() as t:
                sum(range(1000))
            assert t.elapsed >= 0
            """),
        ],
    ),
    "properties": (
        S("""
        class Temperature:
            def __init__(self, c):
                self._c = c
            @property
            def celsius(self):
                return self._c
            @celsius.setter
            def celsius(self, v):
                self._c = v
            @classmethod
            def from_fahrenheit(cls, f):
                return cls((f - 32) * 5 / 9)
            @staticmethod
            def boiling():
                return 100
        """),
        [
            'assert Temperature.from_fahrenheit(212).celsius == 100',
            'assert Temperature.boiling() == 100',
            S("""
            t = Temperature(1)
            t.celsius = 5
            assert t.celsius == 5
            """),
        ],
    ),
    "container_class": (
        S("""
        class Deck:
            SUITS = '♠♥♦♣'
            RANKS = [str(n) for n in range(2, 11)] + list('JQKA')
            def __init__(self):
                self.cards = [r + s for s in self.SUITS for r in self.RANKS]
            def __len__(self):
                return len(self.cards)
            def __getitem__(self, i):
                return self.cards[i]
        """),
        [
            'assert len(Deck()) == 52',
            "assert Deck()[0] == '2♠'",
            "assert Deck()[-1] == 'A♣'",
            "assert Deck()[:2] == ['2♠', '3♠']",
        ],
    ),
    "enum_namedtuple": (
        S("""
        from collections import namedtuple
        from enum import Enum, IntEnum
        class Color(Enum):
            RED = 1
            GREEN = 2
        class Level(IntEnum):
            LOW = 1
            HIGH = 2
        Point = namedtuple('Point', 'x y')
        def complement(c):
            return Color.GREEN if c == Color.RED else Color.RED
        def top():
            return Level.HIGH
        def origin():
            return Point(0, 0)
        """),
        [
            'assert complement(Color.RED) == Color.GREEN',
            "assert complement(Color.GREEN).name == 'RED'",
            'assert top() == 2',
            'assert origin() == (0, 0) and origin().x == 0',
        ],
    ),
    "decorator_in_solution": (
        S("""
        import functools
        def memoize(f):
            cache = {}
            @functools.wraps(f)
            def wrapper(n):
                if n not in cache:
                    cache[n] = f(n)
                return cache[n]
            return wrapper
        @memoize
        def ways(n):
            return 1 if n < 2 else ways(n - 1) + ways(n - 2)
        """),
        [
            'assert ways(80) == 37889062373143906',
            "assert ways.__name__ == 'ways'",
        ],
    ),
    "decorator_used_by_test": (
        S("""
        def counted(f):
            def wrapper(*args):
                wrapper.calls += 1
                return f(*args)
            wrapper.calls = 0
            return wrapper
        """),
        [
            S("""
            @counted
            def double(x):
                return 2 * x
            assert double(3) == 6
            assert double(4) == 8
            assert double.calls == 2
            """),
        ],
    ),
    "closures": (
        S("""
        def make_counter(start=0):
            count = start
            def step():
                nonlocal count
                count += 1
                return count
            return step
        def adder(n):
            return lambda x: x + n
        """),
        [
            S("""
            c = make_counter()
            c()
            c()
            assert c() == 3
            """),
            'assert adder(5)(10) == 15',
            'assert [adder(i)(1) for i in range(3)] == [1, 2, 3]',
        ],
    ),
    "callbacks": (
        S("""
        def apply_all(fn, xs):
            return [fn(x) for x in xs]
        def sort_by(xs, key):
            return sorted(xs, key=key)
        def compose(f, g):
            return lambda x: f(g(x))
        """),
        [
            'assert apply_all(lambda x: x * x, [1, 2, 3]) == [1, 4, 9]',
            "assert sort_by(['bbb', 'a', 'cc'], len) == ['a', 'cc', 'bbb']",
            'assert sort_by([3, 1, 2], lambda x: -x) == [3, 2, 1]',
            "assert compose(str, abs)(-4) == '4'",
        ],
    ),
    "in_place": (
        S("""
        def rotate(nums, k):
            k %= len(nums)
            nums[:] = nums[-k:] + nums[:-k]
        def set_zeroes(m):
            rows = {i for i, r in enumerate(m) for x in r if x == 0}
            cols = {j for r in m for j, x in enumerate(r) if x == 0}
            for i, r in enumerate(m):
                for j in range(len(r)):
                    if i in rows or j in cols:
                        r[j] = 0
        def add_key(d):
            d['new'] = 1
        """),
        [
            S("""
            nums = [1, 2, 3, 4, 5]
            assert rotate(nums, 2) is None
            assert nums == [4, 5, 1, 2, 3]
            """),
            S("""
            m = [[1, 1, 1], [1, 0, 1], [1, 1, 1]]
            row = m[0]
            set_zeroes(m)
            assert m == [[1, 0, 1], [0, 0, 0], [1, 0, 1]] and row is m[0]
            """),
            S("""
            d = {}
            add_key(d)
            assert d == {'new': 1}
            """),
        ],
    ),
    "global_state": (
        S("""
        calls = 0
        def tick():
            global calls
            calls += 1
            return calls
        """),
        [
            S("""
            tick()
            assert tick() == 2
            """),
            'assert calls == 2',
        ],
    ),
    "deep_recursion": (
        S("""
        import sys
        sys.setrecursionlimit(100000)
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)
        """),
        [
            'assert depth(50000) == 50000',
        ],
    ),
    "deep_lru_cache": (
        S("""
        import sys
        from functools import lru_cache
        sys.setrecursionlimit(50000)
        @lru_cache(maxsize=None)
        def stairs(n):
            return 1 if n < 2 else (stairs(n - 1) + stairs(n - 2)) % 1000000007
        """),
        [
            'assert stairs(20000) == stairs(20000)',
            'assert stairs(10) == 89',
        ],
    ),
    "threads": (
        S("""
        import threading
        def parallel_count(n, k):
            total = [0]
            lock = threading.Lock()
            def work():
                for _ in range(n):
                    with lock:
                        total[0] += 1
            ts = [threading.Thread(target=work) for _ in range(k)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            return total[0]
        """),
        [
            'assert parallel_count(1000, 4) == 4000',
        ],
    ),
    "thread_pool": (
        S("""
        from concurrent.futures import ThreadPoolExecutor
        def squares(xs):
            with ThreadPoolExecutor() as ex:
                return list(ex.map(lambda x: x * x, xs))
        """),
        [
            'assert squares(range(50)) == [x * x for x in range(50)]',
        ],
    ),
    "process_pool": (
        S("""
        from concurrent.futures import ProcessPoolExecutor
        def cube(x):
            return x ** 3
        def cubes(xs):
            with ProcessPoolExecutor(max_workers=2) as ex:
                return list(ex.map(cube, xs))
        """),
        [
            'assert cubes([1, 2, 3]) == [1, 8, 27]',
        ],
    ),
    "multiprocessing_pool": (
        S("""
        import multiprocessing
        def square(x):
            return x * x
        def squares(xs):
            with multiprocessing.Pool(2) as p:
                return p.map(square, xs)
        def cpus():
            return multiprocessing.cpu_count() >= 1
        """),
        [
            'assert squares([1, 2, 3]) == [1, 4, 9]',
            'assert cpus()',
        ],
    ),
    "numpy_values": (
        S("""
        import numpy as np
        def mean(xs):
            return float(np.mean(xs))
        def solve(a, b):
            return np.linalg.solve(np.array(a), np.array(b))
        def total(xs):
            return np.sum(xs)
        def eye(n):
            return np.eye(n, dtype=int)
        """),
        [
            'assert mean([1, 2, 3]) == 2.0',
            S("""
            import numpy as np
            assert np.allclose(solve([[2, 0], [0, 4]], [2, 4]), [1, 1])
            """),
            'assert total([1, 2, 3]) == 6',
            'assert eye(2).tolist() == [[1, 0], [0, 1]]',
            S("""
            import numpy as np
            assert np.array_equal(eye(3), np.eye(3))
            """),
        ],
    ),
    "numpy_internal": (
        S("""
        import numpy as np
        def moving_average(xs, w):
            return [round(float(v), 3) for v in np.convolve(xs, np.ones(w) / w, mode='valid')]
        """),
        [
            'assert moving_average([1, 2, 3, 4], 2) == [1.5, 2.5, 3.5]',
        ],
    ),
    "main_guard": (
        S("""
        def add(a, b):
            return a + b
        def module_name():
            return __name__
        if __name__ == '__main__':
            a, b = map(int, input().split())
            print(add(a, b))
        """),
        [
            'assert add(2, 3) == 5',
            "assert module_name() != '__main__'",
        ],
    ),
    "stdin_empty": (
        S("""
        import sys
        DATA = sys.stdin.read()
        def data_len():
            return len(DATA)
        """),
        [
            'assert data_len() == 0',
        ],
    ),
    "prints_a_lot": (
        S("""
        for i in range(20000):
            print('line', i)
        def noisy(n):
            for i in range(n):
                print('x' * 100)
            return n
        """),
        [
            'assert noisy(5000) == 5000',
        ],
    ),
    "big_result": (
        S("""
        def numbers(n):
            return list(range(n))
        def text(n):
            return 'ab' * n
        """),
        [
            S("""
            r = numbers(200000)
            assert len(r) == 200000 and r[-1] == 199999
            """),
            'assert len(text(10 ** 6)) == 2 * 10 ** 6',
        ],
    ),
    "unicode": (
        S("""
        def rev(s):
            return s[::-1]
        def shout(s):
            return s.upper()
        def count_emoji(s):
            return sum(1 for c in s if ord(c) > 0xFFFF)
        """),
        [
            "assert rev('héllo') == 'olléh'",
            "assert shout('straße') == 'STRASSE'",
            "assert count_emoji('hi 😀👍 ok') == 2",
            "assert rev('日本語') == '語本日'",
        ],
    ),
    "file_and_cwd": (
        S("""
        import os
        def write_read(s):
            with open('data.txt', 'w', encoding='utf-8') as f:
                f.write(s)
            with open('data.txt', encoding='utf-8') as f:
                return f.read()
        def my_name():
            return os.path.basename(__file__)
        """),
        [
            "assert write_read('ü') == 'ü'",
            "assert my_name() == 'solution.py'",
        ],
    ),
    "float_math": (
        S("""
        import math
        def hyp(a, b):
            return math.hypot(a, b)
        def root2():
            return math.sqrt(2)
        """),
        [
            'assert abs(root2() - 1.41421356) < 1e-6',
            'assert math.isclose(hyp(3, 4), 5.0)',
            'assert hyp(0, 0) == 0',
        ],
        'import math',
    ),
    "regex_heapq_bisect": (
        S("""
        import bisect, heapq, re
        def words(s):
            return re.findall(r'[a-z]+', s.lower())
        def k_smallest(xs, k):
            return heapq.nsmallest(k, xs)
        def rank(xs, x):
            return bisect.bisect_left(sorted(xs), x)
        """),
        [
            "assert words('Hi, there!') == ['hi', 'there']",
            'assert k_smallest([5, 1, 4, 2], 2) == [1, 2]',
            'assert rank([10, 20, 30], 25) == 2',
        ],
    ),
    # ---------------------------------------------------------------- more ways tests use objects
    "callbacks_from_threads": (
        S("""
        from concurrent.futures import ThreadPoolExecutor
        def pmap(fn, xs):
            with ThreadPoolExecutor(4) as ex:
                return list(ex.map(fn, xs))
        """),
        ["assert pmap(lambda x: x * 3, range(20)) == [x * 3 for x in range(20)]"],
    ),
    "exception_attributes": (
        S("""
        class HttpError(Exception):
            def __init__(self, code):
                super().__init__(f'http {code}')
                self.code = code
        def get(code):
            raise HttpError(code)
        """),
        [
            S("""
            try:
                get(404)
            except HttpError as e:
                assert e.code == 404 and str(e) == 'http 404'
            """),
        ],
    ),
    "test_defined_objects_as_input": (
        S("""
        def area_sum(shapes):
            return sum(s.area() for s in shapes)
        def read(cfg):
            return cfg.x * 2
        """),
        [
            S("""
            class Sq:
                def __init__(self, a):
                    self.a = a
                def area(self):
                    return self.a * self.a
            assert area_sum([Sq(2), Sq(3)]) == 13
            """),
            S("""
            class Cfg:
                pass
            c = Cfg()
            c.x = 21
            assert read(c) == 42
            """),
        ],
    ),
    "generator_send": (
        S("""
        def running_total():
            total = 0
            while True:
                x = yield total
                total += x
        """),
        ["g = running_total()\nnext(g)\nassert g.send(5) == 5\nassert g.send(2) == 7"],
    ),
    "sets_of_objects": (
        S("""
        from dataclasses import dataclass
        @dataclass(frozen=True)
        class P:
            x: int
            y: int
        def points():
            return {P(1, 2), P(3, 4)}
        def index():
            return {P(1, 2): 'a'}
        """),
        ["assert len(points()) == 2 and P(1, 2) in points()", "assert index()[P(1, 2)] == 'a'"],
    ),
    "format_and_kwargs": (
        S("""
        class Money:
            def __init__(self, v):
                self.v = v
            def __format__(self, spec):
                return f'${self.v:{spec}}'
        def greet(name, *, greeting='hi', punct='!'):
            return f'{greeting} {name}{punct}'
        def total(*xs, **kw):
            return sum(xs) + sum(kw.values())
        """),
        [
            "assert f'{Money(3.5):.2f}' == '$3.50'",
            "assert greet('bo', greeting='yo') == 'yo bo!'",
            "args = [1, 2]\nassert total(*args, a=3) == 6",
        ],
    ),
    "builtin_subclass_with_methods": (
        S("""
        from enum import IntEnum
        class Stack(list):
            def push(self, x):
                self.append(x)
            def peek(self):
                return self[-1]
        class Level(IntEnum):
            LOW = 1
            HIGH = 2
        def top():
            return Level.HIGH
        """),
        [
            "s = Stack()\ns.push(1)\ns.push(2)\nassert s.peek() == 2 and s == [1, 2] and isinstance(s, list)",
            "assert top() == 2 and top() + 1 == 3 and top().name == 'HIGH' and sorted([top(), Level.LOW]) == [1, 2]",
        ],
    ),
    "async_called_by_tests": (
        S("""
        import asyncio
        async def fetch(x):
            await asyncio.sleep(0.01)
            return x * 2
        """),
        [
            "import asyncio\nassert asyncio.run(fetch(3)) == 6",
            S("""
            import asyncio
            async def main():
                return await asyncio.gather(fetch(1), fetch(2))
            assert asyncio.run(main()) == [2, 4]
            """),
        ],
    ),
    "printed_output_captured_by_test": (
        S("""
        def hello(n):
            for i in range(n):
                print('hi', i)
        """),
        [
            S("""
            import contextlib, io
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                hello(2)
            assert buf.getvalue() == 'hi 0\\nhi 1\\n'
            """),
        ],
    ),
    "numpy_in_place": (
        S("""
        import numpy as np
        def clip_negative(a):
            a[a < 0] = 0
        """),
        ["import numpy as np\na = np.array([1, -2, 3])\nclip_negative(a)\nassert a.tolist() == [1, 0, 3]"],
    ),
    "imported_by_module_name": (
        S("""
        def f(x):
            return x + 1
        """),
        ["from solution import f as g\nassert g(1) == 2", "import solution\nassert solution.f(2) == 3"],
    ),
}

HUMANEVAL: dict[str, tuple[str, str, str, str]] = {
    "he_full_function": (
        (
            'def has_close(numbers: list, threshold: float) -> bool:\n'
            '    """Any two closer than threshold."""\n'
        ),
        (
            '```python\n'
            'def has_close(numbers: list, threshold: float) -> bool:\n'
            '    s = sorted(numbers)\n'
            '    return any(b - a < threshold for a, b in zip(s, s[1:]))\n'
            '```'
        ),
        (
            'def check(candidate):\n'
            '    assert candidate([1.0, 2.0, 3.9], 0.3) is False\n'
            '    assert candidate([1.0, 2.8, 3.0], 0.3) is True\n'
        ),
        "has_close",
    ),
    "he_body_only": (
        (
            'def add_one(xs: list) -> list:\n'
            '    """Add one to each element."""\n'
        ),
        '    return [x + 1 for x in xs]\n',
        (
            'def check(candidate):\n'
            '    assert candidate([1, 2]) == [2, 3]\n'
            '    assert candidate([]) == []\n'
        ),
        "add_one",
    ),
    "he_main_guard_doctest": (
        (
            'def fact(n: int) -> int:\n'
            '    """>>> fact(3)\n'
            '    6\n'
            '    """\n'
        ),
        (
            '```python\n'
            'def fact(n: int) -> int:\n'
            '    return 1 if n < 2 else n * fact(n - 1)\n'
            '\n'
            "if __name__ == '__main__':\n"
            '    import doctest\n'
            '    doctest.testmod()\n'
            '    print(fact(int(input())))\n'
            '```'
        ),
        (
            'def check(candidate):\n'
            '    assert candidate(5) == 120\n'
            '    assert candidate(0) == 1\n'
        ),
        "fact",
    ),
    "he_random_reference": (
        (
            'def sort_even(l: list) -> list:\n'
            '    """Sort values at even indices."""\n'
        ),
        (
            '```python\n'
            'def sort_even(l: list) -> list:\n'
            '    ev = sorted(l[::2])\n'
            '    out = list(l)\n'
            '    out[::2] = ev\n'
            '    return out\n'
            '```'
        ),
        (
            'def check(candidate):\n'
            '    import random\n'
            '    rng = random.Random(0)\n'
            '    for _ in range(30):\n'
            '        l = [rng.randint(-9, 9) for _ in range(rng.randint(0, 9))]\n'
            '        want = list(l)\n'
            '        want[::2] = sorted(l[::2])\n'
            '        assert candidate(l) == want\n'
        ),
        "sort_even",
    ),
    "he_class_helper": (
        (
            'def word_freq(text: str) -> dict:\n'
            '    """Count words."""\n'
        ),
        (
            '```python\n'
            'class Counter:\n'
            '    def __init__(self):\n'
            '        self.d = {}\n'
            '    def add(self, w):\n'
            '        self.d[w] = self.d.get(w, 0) + 1\n'
            '\n'
            'def word_freq(text: str) -> dict:\n'
            '    c = Counter()\n'
            '    for w in text.split():\n'
            '        c.add(w)\n'
            '    return c.d\n'
            '```'
        ),
        (
            'def check(candidate):\n'
            "    assert candidate('a b a') == {'a': 2, 'b': 1}\n"
            "    assert candidate('') == {}\n"
        ),
        "word_freq",
    ),
    "he_builtin_named_entry": (
        (
            'def format(s: str) -> str:\n'
            '    """Title-case and strip."""\n'
        ),
        (
            '```python\n'
            'def format(s: str) -> str:\n'
            '    return s.strip().title()\n'
            '```'
        ),
        (
            'def check(candidate):\n'
            "    assert candidate('  hello world ') == 'Hello World'\n"
        ),
        "format",
    ),
    "he_generator_entry": (
        (
            'def squares(n: int):\n'
            '    """Yield squares below n**2."""\n'
        ),
        (
            '```python\n'
            'def squares(n: int):\n'
            '    for i in range(n):\n'
            '        yield i * i\n'
            '```'
        ),
        (
            'def check(candidate):\n'
            '    assert list(candidate(4)) == [0, 1, 4, 9]\n'
            '    assert sum(candidate(100)) == 328350\n'
        ),
        "squares",
    ),
    "he_numpy": (
        (
            'def normalize(v: list) -> list:\n'
            '    """Unit vector."""\n'
        ),
        (
            '```python\n'
            'import numpy as np\n'
            '\n'
            'def normalize(v: list) -> list:\n'
            '    a = np.asarray(v, dtype=float)\n'
            '    return (a / np.linalg.norm(a)).tolist()\n'
            '```'
        ),
        (
            'def check(candidate):\n'
            '    out = candidate([3, 4])\n'
            '    assert abs(out[0] - 0.6) < 1e-9 and abs(out[1] - 0.8) < 1e-9\n'
        ),
        "normalize",
    ),
    "he_prompt_helper": (
        (
            'def encode(s: str) -> str:\n'
            '    return "".join(chr(ord(c) + 1) for c in s)\n'
            '\n'
            '\n'
            'def decode(s: str) -> str:\n'
            '    """Inverse of encode."""\n'
        ),
        '    return "".join(chr(ord(c) - 1) for c in s)\n',
        (
            'def check(candidate):\n'
            "    for w in ['abc', 'zz', '']:\n"
            '        assert candidate(encode(w)) == w\n'
        ),
        "decode",
    ),
}
