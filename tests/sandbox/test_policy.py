"""The isolation levels as ``Policy`` values: what each leaves open follows from its layers, "which layer stops
network access?" is one lookup, and docs/sandbox.md's level and host-kind tables say what the policies say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grpo_fast.sandbox import LEVELS, POLICIES, STOPPED_BY, Policy, remaining_threats, weaker_than
from grpo_fast.sandbox.policy import LAYERS, THREATS

DOC = Path(__file__).resolve().parents[2] / "docs" / "sandbox.md"
SIX_THREATS = ("files", "network", "signals", "leftovers")  # what tests/sandbox/six_threats.py attacks


def table(header: str) -> list[list[str]]:
    """The rows of the markdown table in docs/sandbox.md whose header line starts with ``header``."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def open_subjects(policy: Policy) -> set[str]:
    return {t.subject for t in THREATS if t.open_at(policy)}


def test_which_layer_stops_network_access_is_one_lookup() -> None:
    assert STOPPED_BY["network"] == ("namespaces", "seccomp_confines")
    assert all(set(layers) <= set(LAYERS) for layers in STOPPED_BY.values())
    assert [name for name, p in POLICIES.items() if "network" in open_subjects(p)] == ["uid-drop", "rlimits-only"]


def test_every_wording_of_a_threat_is_closed_by_the_same_layers() -> None:
    for t in THREATS:
        assert STOPPED_BY[t.subject] == t.stopped_by, t.subject


def test_a_threat_is_open_exactly_where_none_of_its_layers_holds() -> None:
    for policy in POLICIES.values():
        for subject in open_subjects(policy):
            assert not any(getattr(policy, layer) for layer in STOPPED_BY[subject]), (policy.name, subject)
    assert POLICIES["namespaces+uid-drop"].leaves_open() == POLICIES["namespaces+userns"].leaves_open() == []


def test_the_levels_are_ordered_strongest_first_and_fall_back_to_weaker_ones() -> None:
    order = list(POLICIES)
    assert list(LEVELS) == order and all(LEVELS[n] == p.summary for n, p in POLICIES.items())
    assert all(weaker_than(b, a) for a, b in zip(order, order[1:]))
    for policy in POLICIES.values():
        if policy.without_seccomp:  # the layers only the filter gives are gone in its fallback
            fallback = POLICIES[policy.without_seccomp]
            assert weaker_than(fallback.name, policy.name) and not fallback.seccomp_confines
            assert fallback.uid_drop == policy.uid_drop


def test_refused_layers_add_to_what_a_level_leaves_open() -> None:
    level = "landlock+own-uid"
    base = POLICIES[level].leaves_open()
    found = remaining_threats(level, {"landlock": "holds (ABI 7; signals ...)", "cgroup memory": "refused: ro"})
    assert found[:len(base)] == base and len(found) == len(base) + 1 and found[-1].startswith("memory:")


@pytest.mark.parametrize("row", table("| level | when | what holds |"), ids=lambda r: r[0])
def test_the_levels_table_says_what_each_policy_gives(row: list[str]) -> None:
    name, when, holds = row[0].strip("`"), row[1], row[2]
    policy = POLICIES[name]
    assert when.startswith("root") == policy.uid_drop, "uid drop needs root"
    assert ("Landlock" in holds) == policy.landlock
    assert bool(re.search(r"[Nn]o network isolation|[Nn]etwork open", holds)) == ("network" in open_subjects(policy))
    assert ("your uid" in holds) == policy.same_uid


def test_the_levels_table_lists_every_level_in_order() -> None:
    assert [row[0].strip("`") for row in table("| level | when | what holds |")] == list(POLICIES)


@pytest.mark.parametrize("row", table("| host kind | level |"), ids=lambda r: r[0])
def test_the_host_kinds_table_says_what_each_policy_leaves(row: list[str]) -> None:
    kind, policy = row[0], POLICIES[row[1].strip("`")]
    held, remaining = row[2], row[-1]
    assert kind.startswith("root") == policy.uid_drop, "uid drop needs root"
    assert held.startswith("6 of 6") == (not open_subjects(policy) & set(SIX_THREATS))
    assert bool(re.search(r"network:? open", remaining)) == ("network" in open_subjects(policy))
    if remaining == "nothing known":
        assert policy.leaves_open() == []
