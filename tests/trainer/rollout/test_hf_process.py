"""`rollout.hf.producer=process` (trainer/rollout/hf_process.py): HF generate in a child process, on a copy of
the policy in shared memory. It samples what the in-process engine samples, follows weights loaded into its
copy here without any transfer, and a child that dies or hangs is an error naming it, never a hang."""

import copy
import os
import signal
import subprocess
import sys

import pytest
import torch

from rlvr.trainer.rollout.hf import HFEngine
from rlvr.trainer.rollout.hf_process import HFProcessEngine, ProducerProcessError
from rlvr.trainer.rollout.prompts import render_prompts
from rlvr.trainer.rollout.types import SamplingParams

# one worker runs this file: its module-scoped fixture is built once, not once per xdist worker
pytestmark = pytest.mark.xdist_group("hf_process")


GREEDY = SamplingParams(n=2, max_new_tokens=12, greedy=True)


@pytest.fixture
def prompts(arith_env, tiny_lm):
    return render_prompts(tiny_lm.tokenizer, arith_env, arith_env.rows("train", 4, seed=0))


@pytest.fixture(scope="module")
def shared_engine(tiny_lm):
    """One child for the tests that leave it serving (each child costs a Python with torch to start)."""
    engine = HFProcessEngine(tiny_lm.model(), copy.deepcopy(tiny_lm.tokenizer), seed=0, threads=1, timeout_s=120)
    yield engine
    engine.shutdown()


@pytest.fixture
def engine(shared_engine, tiny_lm):
    shared_engine.sync_weights(tiny_lm.model())  # every test starts from tiny_lm's weights
    return shared_engine


def _same(a, b) -> None:
    assert a.prompt_ids == b.prompt_ids and a.completion_ids == b.completion_ids and a.texts == b.texts
    assert a.truncated == b.truncated
    for x, y in zip(a.logprobs, b.logprobs, strict=True):
        assert x.dtype == torch.float32 and torch.equal(x, y)


def test_the_child_samples_what_the_in_process_engine_samples(engine, tiny_lm, tiny_lm_sft, prompts):
    _same(engine.generate(prompts, GREEDY), HFEngine(tiny_lm.model(), tiny_lm.tokenizer).generate(prompts, GREEDY))
    ids = [tiny_lm.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    _same(engine.generate_ids(ids, GREEDY), HFEngine(tiny_lm.model(), tiny_lm.tokenizer).generate_ids(ids, GREEDY))
    # sampling: the child's logprobs are those of the tokens it sampled under its (shared) weights
    sampled = engine.generate(prompts, SamplingParams(n=3, max_new_tokens=12, temperature=1.0))
    model = tiny_lm.model().eval()
    for prompt, completion, logprobs in zip(sampled.prompt_ids, sampled.completion_ids, sampled.logprobs):
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1:-1].float()  # [T, V]
        expected = logits.log_softmax(-1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)
        assert torch.allclose(logprobs, expected, atol=1e-5)


def test_weights_loaded_here_are_what_the_child_samples_next(engine, tiny_lm, tiny_lm_sft, prompts):
    before = engine.generate(prompts, GREEDY)
    engine.model.load_state_dict(tiny_lm_sft.model().state_dict())  # in place, into the shared pages
    after = engine.generate(prompts, GREEDY)
    assert after.completion_ids != before.completion_ids  # the check discriminates: the new weights answer otherwise
    _same(after, HFEngine(tiny_lm_sft.model(), tiny_lm_sft.tokenizer).generate(prompts, GREEDY))
    engine.sync_weights(tiny_lm.model())  # the Engine protocol's way: back to the first weights
    _same(engine.generate(prompts, GREEDY), before)


def test_a_child_that_dies_is_named_and_one_that_hangs_is_killed(tiny_lm, prompts):
    engine = HFProcessEngine(tiny_lm.model(), copy.deepcopy(tiny_lm.tokenizer), seed=0, threads=1, timeout_s=120)
    try:
        os.kill(engine._process.pid, signal.SIGKILL)
        engine._process.join(30)
        with pytest.raises(ProducerProcessError, match="exit code -9"):
            engine.generate(prompts, GREEDY)
    finally:
        engine.shutdown()
    engine = HFProcessEngine(tiny_lm.model(), copy.deepcopy(tiny_lm.tokenizer), seed=0, threads=1, timeout_s=2)
    try:
        os.kill(engine._process.pid, signal.SIGSTOP)  # alive, never answering
        with pytest.raises(ProducerProcessError, match="did not answer generate within 2 s"):
            engine.generate(prompts, GREEDY)
        engine._process.join(30)
        assert not engine._process.is_alive()  # killed, not left behind
    finally:
        engine.shutdown()


def test_an_error_in_the_child_comes_back_with_its_traceback(engine, prompts):
    with pytest.raises(ProducerProcessError, match="failed in generate_ids:(.|\n)*Traceback"):
        engine.generate_ids([[]], GREEDY)  # an empty prompt: generate itself refuses it
    _same(engine.generate(prompts, GREEDY), engine.generate(prompts, GREEDY))  # and the child still serves


def test_shutdown_stops_the_child(tiny_lm):
    engine = HFProcessEngine(tiny_lm.model(), copy.deepcopy(tiny_lm.tokenizer), seed=0, threads=1, timeout_s=120)
    process = engine._process
    assert process.is_alive()
    engine.shutdown()
    assert not process.is_alive() and process.exitcode == 0  # it was asked, not killed
    engine.shutdown()  # twice is harmless


def test_a_script_without_a_main_guard_is_told_what_to_do(tiny_lm, tmp_path):
    """spawn imports the main module again in the child; a script that starts the producer at import time
    gets an error that says so, not a bare 'the pipe closed'."""
    script = tmp_path / "train_here.py"
    script.write_text(
        "import copy\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "from rlvr.trainer.rollout.hf_process import HFProcessEngine\n"
        f"path = {str(tiny_lm.path)!r}\n"
        "HFProcessEngine(AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path), seed=0,"
        " threads=1, timeout_s=60)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode != 0
    assert "died during start" in done.stderr and "if __name__ == '__main__':" in done.stderr
