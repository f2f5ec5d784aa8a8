"""algo.length_match shown engaged through DPO's own config (issue 52): the pairing DPO's step asks for follows the
algo node's length_match (test_pairs.py covers build_pairs called directly). tests/mutation_check.py switches the
wiring off and requires this test to fail."""

import pytest
from omegaconf import OmegaConf

from rlvr.trainer.algos.dpo import pairs_of
from rlvr.trainer.algos.pairs import Scored


@pytest.mark.parametrize("length_match,expected", [(True, (3, 4)), (False, (1, 2))])
def test_dpo_pairs_follow_algo_length_match(length_match, expected):
    group = [Scored("a", 0.1, 3), Scored("b", 1.0, 9), Scored("c", 0.0, 2), Scored("d", 1.0, 4), Scored("e", 0.0, 5)]
    algo = OmegaConf.create({"pair_strategy": "best_vs_worst", "max_pairs_per_prompt": 8, "min_margin": 0.0,
                             "length_match": length_match})
    pairs, _ = pairs_of([group], algo)
    # best {b: 9, d: 4} x worst {c: 2, e: 5}: the closest lengths are d and e; unmatched, the first of each (b, c)
    assert [(p.chosen, p.rejected) for p in pairs] == [expected]
