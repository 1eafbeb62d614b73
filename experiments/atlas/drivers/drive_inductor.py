"""Inductor's Triton kernels of real architectures: Hugging Face ``transformers`` models built from their published
configurations (no weights: randomly initialised, 2 decoder layers at full width), compiled with ``torch.compile``
and run for one training step (forward, loss, backward) and one inference forward, bf16, batch 1 x 512 tokens, on
the GPU. Run by ``ptxprobe capture`` (Inductor writes and compiles every kernel in this process, so the capture sees
each one); nothing here is timed. Needs a GPU (Inductor emits CUDA kernels only where it can launch them) and the
``transformers`` the GPU machine has.

The sizes are the models' own (hidden, MLP, heads, key-value heads, head dim, vocabulary), written here as the numbers
their configuration files publish; one line per model (``atlas-driver: {json}``) says whether it compiled and ran.
"""

from __future__ import annotations

import json
import os
import sys
import time

# the capture hook sees each compile where it happens: Inductor compiles in this process
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

LAYERS, TOKENS = 2, 512
# name: (transformers config class, its fields): the published sizes of each model, 2 of its layers
MODELS = {
    "llama-3-8b": ("LlamaConfig", dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                       num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0,
                                       max_position_embeddings=8192, rms_norm_eps=1e-5)),
    "qwen2.5-7b": ("Qwen2Config", dict(hidden_size=3584, intermediate_size=18944, num_attention_heads=28,
                                       num_key_value_heads=4, vocab_size=152064, rope_theta=1000000.0,
                                       max_position_embeddings=32768, rms_norm_eps=1e-6)),
    "mistral-7b": ("MistralConfig", dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                         num_key_value_heads=8, vocab_size=32768, rope_theta=1000000.0,
                                         max_position_embeddings=32768, rms_norm_eps=1e-5)),
    "gemma-2-2b": ("Gemma2Config", dict(hidden_size=2304, intermediate_size=9216, num_attention_heads=8,
                                        num_key_value_heads=4, head_dim=256, vocab_size=256000,
                                        attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                                        query_pre_attn_scalar=256, sliding_window=4096)),
    "phi-3-mini": ("Phi3Config", dict(hidden_size=3072, intermediate_size=8192, num_attention_heads=32,
                                      num_key_value_heads=32, vocab_size=32064, max_position_embeddings=4096)),
    "gpt2": ("GPT2Config", dict(n_embd=768, n_head=12, n_positions=1024, vocab_size=50257)),
}


def run_model(name: str) -> dict:
    """One model: a compiled training step and a compiled inference forward."""
    import torch
    import transformers

    cls, fields = MODELS[name]
    layers = {"n_layer": LAYERS} if cls == "GPT2Config" else {"num_hidden_layers": LAYERS}
    config = getattr(transformers, cls)(**fields, **layers)
    model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16).cuda()
    ids = torch.randint(0, config.vocab_size, (1, TOKENS), device="cuda")
    step = torch.compile(model)
    out = step(input_ids=ids, labels=ids)
    out.loss.backward()
    model.eval()
    with torch.no_grad():
        torch.compile(model)(input_ids=ids)
    torch.cuda.synchronize()
    return {"params_millions": round(sum(p.numel() for p in model.parameters()) / 1e6, 1)}


def main() -> int:
    import torch

    torch.manual_seed(0)
    chosen = sys.argv[1].split(",") if len(sys.argv) > 1 else list(MODELS)
    for name in chosen:
        began = time.perf_counter()
        try:
            said = {"op": name, "ran": True, **run_model(name)}
        except Exception as exc:  # noqa: BLE001 - counted per model, the driver goes on
            said = {"op": name, "ran": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
        torch._dynamo.reset()
        print("atlas-driver:", json.dumps({**said, "seconds": round(time.perf_counter() - began, 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
