"""`rlvr eval` through the real code verifier and Docker sandbox: a stand-in engine that answers with
HumanEval's canonical solutions scores pass@1 = 1.0; one answering with broken bodies scores 0.0."""

import os

import pytest
import torch

from rlvr.trainer.evaluation.eval_config import compose_eval_config as compose_eval
from rlvr.trainer.evaluation.eval_report import RESULTS_SCHEMA, schema_errors
from rlvr.trainer.evaluation.eval_run import run_eval
from rlvr.trainer.rollout.types import Rollout

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide


N_PROMPTS = 40


class PlainTokenizer:
    """Renders a chat as its last user message, so the stand-in engine can look the problem up."""

    chat_template = "plain"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return messages[-1]["content"]


class AnswerBook:
    """An engine that answers each prompt from a fixed book, `params.n` times."""

    def __init__(self, answers: dict[str, str]):
        self.answers, self.tokenizer = answers, PlainTokenizer()

    def generate(self, prompts, params):
        texts = [self.answers[p] for p in prompts for _ in range(params.n)]
        return Rollout([[0]] * len(texts), [[0, 1]] * len(texts), texts, [torch.zeros(2)] * len(texts),
                       [False] * len(texts))


@pytest.mark.slow  # 160 sandboxed runs, about 20 s on 2 cores
def test_canonical_solutions_pass_and_broken_ones_fail(tmp_path):
    if os.environ.get("RLVR_SKIP_DOCKER") == "1":
        pytest.skip("RLVR_SKIP_DOCKER=1")
    from rlvr.envs import load_env

    rows = load_env("humaneval").rows("test", N_PROMPTS, seed=0)
    prompt = {r["messages"][-1]["content"]: r for r in rows}
    books = {
        "canonical": AnswerBook({p: r["reference"] for p, r in prompt.items()}),
        "broken": AnswerBook({p: f"```python\n{r['tests']['prefix']}    return None\n```" for p, r in prompt.items()}),
    }
    cfg = compose_eval(["models=[canonical,broken]", "env=humaneval", f"n_prompts={N_PROMPTS}", "n_samples=2",
                        "temperature=1.0", f"output_dir={tmp_path}"])
    results = run_eval(cfg, log=lambda *_: None, engine_factory=lambda model: books[model.label])
    assert schema_errors(results, RESULTS_SCHEMA) == []
    canonical, broken = results["results"]
    assert canonical["model"] == "canonical" and canonical["n_prompts"] == N_PROMPTS
    assert (canonical["pass@1"], canonical["pass@k"]["2"], canonical["maj@k"]["2"]) == (1.0, 1.0, 1.0)
    assert canonical["status_counts"] == {"correct": 2 * N_PROMPTS}
    assert (broken["pass@1"], broken["pass@k"]["2"], broken["maj@k"]["2"], broken["reward_mean"]) == (0.0, 0.0, 0.0, 0.0)
    assert "correct" not in broken["status_counts"]
