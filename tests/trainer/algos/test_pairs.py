"""The pair builder (trainer/algos/pairs.py) on hand-made groups; each expected pair list is worked out by hand."""

import pytest

from rlvr.trainer.algos.pairs import Scored, build_pairs


def group(*items):
    """items: (text, reward, length)."""
    return [Scored(t, r, n) for t, r, n in items]


def as_tuples(pairs):
    return [(p.group, p.chosen, p.rejected) for p in pairs]


def test_correct_over_incorrect_every_combination():
    g = group(("a", 1.0, 3), ("b", 0.0, 5), ("c", 1.0, 4), ("d", 0.0, 6))
    pairs, stats = build_pairs([g], "all")
    # chosen {0, 2} x rejected {1, 3}, spread order: round 0 pairs chosen k with its k-th rejected
    # (0-1, 2-3), round 1 with the next (0-3, 2-1)
    assert as_tuples(pairs) == [(0, 0, 1), (0, 2, 3), (0, 0, 3), (0, 2, 1)]
    assert [p.reward_gap for p in pairs] == [1.0] * 4
    # lengths: chosen 3, 4, 3, 4 -> 3.5; rejected 5, 6, 6, 5 -> 5.5
    assert stats == {"pairs/count": 4, "pairs/per_prompt": 4.0, "pairs/no_pair_frac": 0.0,
                     "pairs/chosen_len_mean": 3.5, "pairs/rejected_len_mean": 5.5}


def test_ties_all_correct_and_all_wrong_give_no_pair():
    all_correct = group(("a", 1.0, 3), ("b", 1.0, 4))
    all_wrong = group(("a", 0.0, 3), ("b", 0.0, 4), ("c", 0.0, 2))
    mixed = group(("x", 1.0, 3), ("y", 1.0, 3), ("z", 0.0, 3))
    pairs, stats = build_pairs([all_correct, all_wrong, mixed], "all")
    assert as_tuples(pairs) == [(2, 0, 2), (2, 1, 2)]  # the tied x, y are never paired with each other
    assert stats["pairs/no_pair_frac"] == pytest.approx(2 / 3)
    assert stats["pairs/per_prompt"] == pytest.approx(2 / 3)
    pairs, stats = build_pairs([all_correct, all_wrong], "best_vs_worst")
    assert pairs == [] and stats["pairs/no_pair_frac"] == 1.0 and stats["pairs/chosen_len_mean"] == 0.0


def test_identical_texts_are_deduplicated_first_kept():
    g = group(("same", 1.0, 3), ("same", 1.0, 3), ("wrong", 0.0, 4), ("wrong", 0.0, 4), ("other", 0.0, 5))
    pairs, _ = build_pairs([g], "all")
    # unique: 0 (same, 1.0), 2 (wrong), 4 (other): 1 chosen x 2 rejected
    assert as_tuples(pairs) == [(0, 0, 2), (0, 0, 4)]
    # a text sampled twice with different rewards (a noisy verifier) keeps its first reward: no pair here
    noisy = group(("t", 1.0, 3), ("t", 0.0, 3))
    assert build_pairs([noisy], "all")[0] == []


def test_min_margin_and_gap_order():
    g = group(("a", 1.0, 3), ("b", 0.1, 3), ("c", 0.0, 3))
    pairs, _ = build_pairs([g], "all")
    # gaps: a-c 1.0, a-b 0.9, b-c 0.1; largest first
    assert as_tuples(pairs) == [(0, 0, 2), (0, 0, 1), (0, 1, 2)]
    assert [p.reward_gap for p in pairs] == pytest.approx([1.0, 0.9, 0.1])
    pairs, _ = build_pairs([g], "all", min_margin=0.5)  # b-c (0.1) fails
    assert as_tuples(pairs) == [(0, 0, 2), (0, 0, 1)]
    pairs, _ = build_pairs([g], "all", min_margin=0.95)  # only a-c (1.0)
    assert as_tuples(pairs) == [(0, 0, 2)]
    pairs, stats = build_pairs([g], "best_vs_worst", min_margin=1.5)  # 1.0 < 1.5: none
    assert pairs == [] and stats["pairs/no_pair_frac"] == 1.0


def test_cap_keeps_every_chosen_used_once_before_twice():
    # 3 correct (0, 1, 2) x 3 wrong (3, 4, 5) = 9 pairs; cap 4.
    g = group(*[(f"c{i}", 1.0, 3) for i in range(3)], *[(f"w{i}", 0.0, 3) for i in range(3)])
    pairs, stats = build_pairs([g, g], "all", max_pairs_per_prompt=4)
    # round 0: (0,3) (1,4) (2,5); round 1 starts: (0,4)
    assert as_tuples(pairs[:4]) == [(0, 0, 3), (0, 1, 4), (0, 2, 5), (0, 0, 4)]
    assert as_tuples(pairs[4:]) == [(1, 0, 3), (1, 1, 4), (1, 2, 5), (1, 0, 4)]
    assert stats["pairs/count"] == 8 and stats["pairs/per_prompt"] == 4.0
    assert len(build_pairs([g], "all", max_pairs_per_prompt=100)[0]) == 9


def test_best_vs_worst_one_pair_per_prompt():
    g = group(("a", 0.1, 3), ("b", 1.0, 9), ("c", 0.0, 2), ("d", 1.0, 4), ("e", 0.0, 5))
    pairs, stats = build_pairs([g], "best_vs_worst")
    assert as_tuples(pairs) == [(0, 1, 2)]  # the first best (b) and the first worst (c) in sample order
    assert pairs[0].reward_gap == 1.0
    assert stats["pairs/chosen_len_mean"] == 9 and stats["pairs/rejected_len_mean"] == 2


def test_length_matching_prefers_close_lengths():
    g = group(("a", 0.1, 3), ("b", 1.0, 9), ("c", 0.0, 2), ("d", 1.0, 4), ("e", 0.0, 5))
    pairs, _ = build_pairs([g], "best_vs_worst", length_match=True)
    # best {b: 9, d: 4} x worst {c: 2, e: 5}: |9-2| 7, |9-5| 4, |4-2| 2, |4-5| 1 -> d, e
    assert as_tuples(pairs) == [(0, 3, 4)]
    pairs, stats = build_pairs([g], "all", length_match=True, max_pairs_per_prompt=3)
    # gap 1.0 pairs (b/d x c/e) come first, by length gap: d-e 1, d-c 2, b-e 4 (b-c 7 is cut by the cap)
    assert as_tuples(pairs) == [(0, 3, 4), (0, 3, 2), (0, 1, 4)]
    assert stats["pairs/chosen_len_mean"] == pytest.approx((4 + 4 + 9) / 3)
    assert stats["pairs/rejected_len_mean"] == pytest.approx((5 + 2 + 5) / 3)
    unmatched, _ = build_pairs([g], "all", max_pairs_per_prompt=3)
    assert as_tuples(unmatched) == [(0, 1, 2), (0, 3, 4), (0, 1, 4)]  # spread order instead


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="strategy='best'"):
        build_pairs([], "best")
    with pytest.raises(ValueError, match="max_pairs_per_prompt=0"):
        build_pairs([], "all", max_pairs_per_prompt=0)
    assert build_pairs([], "all")[1]["pairs/no_pair_frac"] == 0.0
