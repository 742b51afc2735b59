"""Each policy rule pinned to the paper (DESIGN §3) on small hand-built trees."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from search.engine.policies import (
    AdaptiveEpsilonGreedy,
    BestOfK,
    Greedy,
    Reflexion,
    dead_branch,
    get_policy,
    policy_from_dict,
    root_throttled,
    selection_rng,
)
from tests.engine.helpers import make_tree

P, F = "pass", "build_error"


def test_it_uses_the_papers_defaults():
    p = get_policy("adaptive-egreedy")
    assert (p.n_root, p.n_child, p.eps) == (5, 3, 0.35)


def test_it_throttles_the_root_once_it_has_n_root_children():
    four = make_tree([(0, None, P, 10.0)] + [(k, 0, P, 12.0) for k in range(1, 5)])
    five = make_tree([(0, None, P, 10.0)] + [(k, 0, P, 12.0) for k in range(1, 6)])
    policy = AdaptiveEpsilonGreedy()
    assert not root_throttled(four, 5)
    assert 0 in [n.id for n in policy.selectable(four)]
    assert root_throttled(five, 5)
    assert 0 not in [n.id for n in policy.selectable(five)]


def test_it_counts_expansions_in_flight_against_the_root_throttle():
    four = make_tree([(0, None, P, 10.0)] + [(k, 0, P, 12.0) for k in range(1, 5)])
    policy = AdaptiveEpsilonGreedy()
    assert 0 in [n.id for n in policy.selectable(four)]
    assert 0 not in [n.id for n in policy.selectable(four, Counter({0: 1}))]


def test_it_prunes_a_node_with_more_than_n_child_children_all_failed():
    # node 1 has 3 failed children (not more than n_child=3): still selectable; node 2 has 4: pruned.
    tree = make_tree(
        [(0, None, P, 10.0), (1, 0, P, 8.0), (2, 0, P, 9.0)]
        + [(k, 1, F, None) for k in (3, 4, 5)]
        + [(k, 2, F, None) for k in (6, 7, 8, 9)]
    )
    assert not dead_branch(tree, 1, 3)
    assert dead_branch(tree, 2, 3)
    ids = [n.id for n in AdaptiveEpsilonGreedy().selectable(tree)]
    assert 1 in ids and 2 not in ids


def test_a_branch_with_one_success_is_not_dead():
    tree = make_tree([(0, None, P, 10.0), (1, 0, P, 8.0)] + [(k, 1, F, None) for k in (2, 3, 4, 5)] + [(6, 1, P, 9.0)])
    assert not dead_branch(tree, 1, 3)


def test_it_exploits_the_lowest_score_with_probability_one_minus_eps():
    tree = make_tree([(0, None, P, 10.0), (1, 0, P, 8.0), (2, 0, P, 5.0), (3, 1, F, None), (4, 2, P, 6.0)])
    assert AdaptiveEpsilonGreedy(eps=0.0).select(tree, random.Random(0)) == 2


def test_it_explores_uniformly_among_expandable_leaves_failed_ones_included():
    # leaves: 3 (failed), 4 (pass); the root and nodes 1, 2 have children.
    tree = make_tree([(0, None, P, 10.0), (1, 0, P, 8.0), (2, 0, P, 5.0), (3, 1, F, None), (4, 2, P, 6.0)])
    policy = AdaptiveEpsilonGreedy(eps=1.0)
    assert sorted(n.id for n in policy.expandable_leaves(tree)) == [3, 4]
    picks = Counter(policy.select(tree, random.Random(s)) for s in range(400))
    assert set(picks) == {3, 4}
    assert 150 < picks[3] < 250  # uniform


def test_the_mix_of_exploit_and_explore_follows_eps():
    tree = make_tree([(0, None, P, 10.0), (1, 0, P, 8.0), (2, 0, P, 5.0), (3, 1, F, None), (4, 2, P, 6.0)])
    picks = Counter(AdaptiveEpsilonGreedy().select(tree, random.Random(s)) for s in range(2000))
    # exploit -> 2 always; explore -> 3 or 4 with 0.35/2 each
    assert picks[2] / 2000 == pytest.approx(0.65, abs=0.04)
    assert picks[3] / 2000 == pytest.approx(0.175, abs=0.03)


def test_a_leaf_with_an_attempt_in_flight_is_not_a_leaf():
    tree = make_tree([(0, None, P, 10.0), (1, 0, P, 8.0), (2, 0, F, None)])
    policy = AdaptiveEpsilonGreedy(eps=1.0)
    assert sorted(n.id for n in policy.expandable_leaves(tree)) == [1, 2]
    assert [n.id for n in policy.expandable_leaves(tree, Counter({1: 1}))] == [2]


def test_it_returns_none_when_nothing_is_selectable():
    tree = make_tree([(0, None, P, 10.0)] + [(k, 0, F, None) for k in range(1, 6)])
    assert AdaptiveEpsilonGreedy().select(tree, random.Random(0), can_debug=False) is None


def test_failed_nodes_are_not_selectable_without_a_debug_agent():
    tree = make_tree([(0, None, P, 10.0), (1, 0, F, None)])
    assert AdaptiveEpsilonGreedy(eps=1.0).select(tree, random.Random(0), can_debug=False) == 0


def test_best_of_k_always_picks_the_root():
    tree = make_tree([(0, None, P, 10.0)] + [(k, 0, P, 2.0) for k in range(1, 9)])
    assert {BestOfK().select(tree, random.Random(s)) for s in range(20)} == {0}


def test_reflexion_refines_the_latest_attempt_even_a_failed_one():
    tree = make_tree([(0, None, P, 10.0), (1, 0, P, 2.0), (2, 1, P, 9.0), (3, 2, F, None)])
    assert Reflexion().select(tree, random.Random(0)) == 3
    assert Reflexion().select(make_tree([(0, None, P, 10.0)]), random.Random(0)) == 0


def test_greedy_picks_the_fastest_correct_node():
    tree = make_tree([(0, None, P, 10.0), (1, 0, P, 2.0), (2, 1, P, 9.0), (3, 2, F, None)])
    assert Greedy().select(tree, random.Random(0)) == 1


def test_selection_is_reproducible_from_seed_and_attempt():
    tree = make_tree([(0, None, P, 10.0), (1, 0, P, 8.0), (2, 0, P, 5.0), (3, 1, F, None), (4, 2, P, 6.0)])
    a = [AdaptiveEpsilonGreedy().select(tree, selection_rng(7, k)) for k in range(50)]
    b = [AdaptiveEpsilonGreedy().select(tree, selection_rng(7, k)) for k in range(50)]
    assert a == b and len(set(a)) > 1


def test_policies_round_trip_and_bad_names_say_what_exists():
    p = get_policy("adaptive-egreedy", eps=0.2, n_root=4)
    assert policy_from_dict(p.to_dict()) == p
    with pytest.raises(ValueError, match="best-of-k"):
        get_policy("beam")
    with pytest.raises(ValueError, match="eps"):
        get_policy("adaptive-egreedy", eps=2.0)
