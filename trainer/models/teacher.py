"""The frozen teacher of `algo=distill` (trainer/algos/distill.py), loaded in process at start.

`algo.teacher` names it as `model.name_or_path` names a policy: a local Hugging Face directory (a checkpoint
`checkpoints/step_N/`), a run directory (its latest checkpoint), a `.gguf` file or a packaged model such as
`smollm2`, or a Hub name. It is loaded in float32, in eval mode (no dropout) with no gradient, on the policy's
device, and never trained or saved. Its memory is printed at start.

Distillation compares the student's and the teacher's logprobs of the same token ids, so the teacher must
share the student's tokenizer: one whose vocabulary differs (another id for any token, or another size) is
refused at start in one line naming both. Where the vocabularies agree but the logits differ in width (an
embedding matrix padded past the vocabulary), `algo.loss=gkd` compares them over the narrower width.

Left out: a served teacher (a vLLM server returning prompt logprobs); the teacher runs in this process.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlvr.errors import ConfigError


def teacher_path(teacher: str, log=print) -> str:
    """`algo.teacher` resolved to a directory or Hub name (module docstring); refused when empty or missing."""
    from rlvr.trainer.checkpoint import latest_checkpoint
    from rlvr.trainer.models.gguf_import import resolve_gguf

    value = str(teacher or "")
    if not value:
        raise ConfigError("algo.teacher is required for algo=distill: a checkpoint directory, a run directory, a "
                          ".gguf file, a packaged model such as smollm2, or a Hub name")
    path = Path(value).expanduser()
    if path.is_dir() and (path / "checkpoints").is_dir() and not (path / "config.json").exists():
        checkpoint = latest_checkpoint(path)
        if checkpoint is None:
            raise ConfigError(f"algo.teacher={value}: a run directory with no checkpoint under checkpoints/")
        return str(checkpoint)
    if value.startswith((".", "/", "~")) and not path.exists():
        raise ConfigError(f"algo.teacher={value}: no such file or directory")
    try:
        return resolve_gguf(value, log=log)
    except ConfigError as error:  # its message names model.name_or_path, the policy's key
        raise ConfigError(f"algo.teacher={value}: {error}") from None


def check_same_tokenizer(student_tokenizer, teacher_tokenizer, student: str, teacher: str) -> None:
    """Refuse a teacher whose vocabulary differs from the student's, in one line naming both."""
    student_vocab, teacher_vocab = student_tokenizer.get_vocab(), teacher_tokenizer.get_vocab()
    if student_vocab == teacher_vocab:
        return
    differing = sorted(token for token in student_vocab.keys() & teacher_vocab.keys()
                       if student_vocab[token] != teacher_vocab[token])
    detail = (f"{len(differing)} shared tokens have other ids" if differing
              else f"{len(student_vocab.keys() ^ teacher_vocab.keys())} tokens are in one vocabulary only")
    raise ConfigError(f"algo.teacher={teacher}: its tokenizer ({len(teacher_vocab)} tokens) is not the student's "
                      f"(model {student}, {len(student_vocab)} tokens; {detail}); distillation compares "
                      f"logprobs of the same token ids, so give a teacher with the student's tokenizer")


def load_teacher(teacher: str, student_tokenizer, student: str, device, log=print):
    """The frozen teacher at `teacher` (`algo.teacher`), its tokenizer checked against the student's, on `device`;
    logs its size and memory."""
    path = teacher_path(teacher, log=log)
    try:
        teacher_tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(f"algo.teacher={teacher}: cannot load a tokenizer ({reason})") from None
    check_same_tokenizer(student_tokenizer, teacher_tokenizer, student, teacher)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
    model.eval()  # no dropout: its logprobs are a fixed target
    model.requires_grad_(False)
    parameters = sum(p.numel() for p in model.parameters())
    size = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    log(f"teacher: {path} ({parameters / 1e6:.2f}M parameters, {size / 2**20:.1f} MiB float32 on {device}; "
        f"frozen, eval mode, no gradient)")
    return model
