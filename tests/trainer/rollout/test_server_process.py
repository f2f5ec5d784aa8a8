"""The environment a `vllm serve` process that rlvr starts is given (trainer/rollout/server_process.py), without
starting one: tests/trainer/rollout/test_server_rollout.py runs two real servers and reads what they log."""

import pytest

from rlvr.trainer.rollout import server_process
from rlvr.trainer.rollout.server_process import VLLMServer


@pytest.mark.parametrize("inherited, expected", [(None, "INFO"), ("ERROR", "INFO"), ("warning", "INFO"),
                                                 ("DEBUG", "DEBUG"), ("debug", "DEBUG")])
def test_the_server_logs_at_least_info_whatever_this_process_has(monkeypatch, tmp_path, inherited, expected):
    # ERROR is what `import trl` sets in any process (trl/_compat.py); the server's log file would then hold no
    # INFO line: not the model it loaded, not the KV cache it took
    monkeypatch.setattr(server_process, "_platform_args", lambda: [])  # no vLLM import: the flags are not checked here
    if inherited is None:
        monkeypatch.delenv("VLLM_LOGGING_LEVEL", raising=False)
    else:
        monkeypatch.setenv("VLLM_LOGGING_LEVEL", inherited)
    server = VLLMServer(tmp_path / "model", log_dir=tmp_path / "logs")
    assert server.env["VLLM_LOGGING_LEVEL"] == expected
    assert server.env["PYTHONUNBUFFERED"] == "1"
    assert server.log_path.parent == tmp_path / "logs" and server.process is None
