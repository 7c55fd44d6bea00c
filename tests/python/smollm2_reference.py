#!/usr/bin/env python3
"""References for the checks on the real SmolLM2-135M-Instruct GGUF, from the
libraries users trust (run in the tests' venv, scripts/python-env.sh).

  smollm2_reference.py weights GGUF IMPORTED_DIR
      Every tensor kvlens-cli import gguf wrote equals, bit for bit, the Python
      gguf package's dequantisation of the same GGUF tensor; Q and K equal it
      after transformers' own reversal of llama.cpp's row permutation. Exits 1
      naming the first tensors that differ.

  smollm2_reference.py reference GGUF OUT_DIR
      Writes OUT_DIR/reference.json and OUT_DIR/logits.f32 (written beside,
      renamed into place): llama.cpp's token ids (llama-cpp-python,
      vocab_only) and transformers' GGUF tokenizer's ids for the strings of
      reference_strings.py plus SmolLM2's chat markers; a 256-token prompt,
      the full-cache logits transformers' LlamaForCausalLM (loaded from the
      same GGUF, f32, eager attention) gives at every position, and its 64
      greedy tokens. tests/model/smollm2_test.cpp compares KVLens with them.
"""
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

# References are computed offline and quietly: no hub, no progress bars.
for key, value in (("HF_HUB_OFFLINE", "1"), ("TQDM_DISABLE", "1"), ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
                   ("TRANSFORMERS_VERBOSITY", "error")):
    os.environ.setdefault(key, value)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from reference_strings import STRINGS  # noqa: E402

PROMPT_TOKENS = 256
GREEDY_STEPS = 64

# SmolLM2's own chat markers and special-token look-alikes, beside the
# shared strings.
CHAT_STRINGS = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_end|><|endoftext|><|im_start|>",
    "<repo_name>kvlens<file_sep>main.cpp<gh_stars>100",
    "<|im_start |> <|im_end| > <im_start>",
    "12345678901234567890 000 007 3.14e-10",
    "\t\t\t    \n\n\n\n    \t",
]


def strings():
    return STRINGS + CHAT_STRINGS


def dequantized(reader_tensor):
    from gguf.quants import dequantize
    t = reader_tensor
    return dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)])


def check_weights(gguf_path, imported):
    from gguf import GGUFReader
    from safetensors.numpy import load_file
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS

    reader = GGUFReader(gguf_path)
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    heads = fields["llama.attention.head_count"]
    kv_heads = fields["llama.attention.head_count_kv"]
    processor = TENSOR_PROCESSORS["llama"](config={"num_attention_heads": heads, "num_key_value_heads": kv_heads})
    ours = load_file(str(Path(imported) / "model.safetensors"))
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    layer = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    bad, compared, elements = [], 0, 0
    for t in reader.tensors:
        if t.name in names:
            hf = names[t.name]
        else:
            _, i, part, kind = t.name.split(".")
            hf = f"model.layers.{i}.{layer[part]}.{kind}"
        want = dequantized(t).astype(np.float32)
        if t.name.endswith(("attn_q.weight", "attn_k.weight")):
            # transformers' own reversal of llama.cpp's permutation
            want = processor.process(want, t.name).weights
        got = ours.get(hf)
        if got is None:
            bad.append(f"{hf} (from {t.name}) is missing")
        elif got.shape != want.shape:
            bad.append(f"{hf}: shape {got.shape}, expected {want.shape}")
        elif got.dtype != np.float32 or got.tobytes() != np.ascontiguousarray(want).tobytes():
            diff = int(np.sum(got.view(np.uint32) != np.ascontiguousarray(want).view(np.uint32)))
            bad.append(f"{hf} (from {t.name}, {t.tensor_type.name}): {diff} of {want.size} elements differ")
        compared += 1
        elements += want.size
    extra = sorted(set(ours) - {names.get(t.name) for t in reader.tensors} - {None})
    print(f"compared {compared} tensors, {elements} elements, with gguf's dequantisation "
          f"(Q/K through transformers' reverse permutation): {len(bad)} differ")
    for line in bad[:10]:
        print("  " + line)
    return 1 if bad else 0


def write_reference(gguf_path, out_dir):
    import torch
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path).resolve()
    vocab = Llama(model_path=str(gguf_path), vocab_only=True, verbose=False)
    hf_tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    cases = []
    for text in strings():
        llama_ids = vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        hf_ids = hf_tok.encode(text, add_special_tokens=False)
        cases.append({"text": text, "llama_cpp": llama_ids, "transformers": hf_ids})

    text = STRINGS[STRINGS.index(next(s for s in STRINGS if s.startswith("The KV cache stores")))]
    text += "\n\n" + (HERE.parents[1] / "resources" / "examples" / "long-haystack.txt").read_text()
    prompt = vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False)[:PROMPT_TOKENS]
    assert len(prompt) == PROMPT_TOKENS, len(prompt)

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                 dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        out = model(torch.tensor([prompt]), use_cache=True)
        logits = out.logits[0].float().numpy()
        past = out.past_key_values
        nxt = int(logits[-1].argmax())
        greedy = []
        for _ in range(GREEDY_STEPS):
            greedy.append(nxt)
            out = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
            past = out.past_key_values
            nxt = int(out.logits[0, -1].argmax())

    import llama_cpp
    import transformers
    out_dir = Path(out_dir)
    tmp = Path(tempfile.mkdtemp(prefix=".reference-", dir=out_dir.parent))
    try:
        np.ascontiguousarray(logits, dtype="<f4").tofile(tmp / "logits.f32")
        ref = {"gguf": str(gguf_path), "llama_cpp_python": llama_cpp.__version__,
               "transformers": transformers.__version__, "torch": torch.__version__,
               "strings": cases, "prompt_ids": prompt, "vocab": int(logits.shape[1]),
               "logits_file": "logits.f32", "greedy_ids": greedy}
        (tmp / "reference.json").write_text(json.dumps(ref, ensure_ascii=False, indent=1))
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    differ = sum(1 for c in cases if c["llama_cpp"] != c["transformers"])
    print(f"{out_dir}: {len(cases)} strings ({differ} where transformers' GGUF tokenizer differs from llama.cpp), "
          f"{PROMPT_TOKENS}-token prompt logits, {GREEDY_STEPS} greedy tokens")
    return 0


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("weights", "reference"):
        sys.exit(__doc__)
    cmd, gguf_path, path = sys.argv[1:]
    if not Path(gguf_path).is_file():
        sys.exit(f"{gguf_path}: missing (scripts/fetch-smollm2.sh fetches it)")
    sys.exit(check_weights(gguf_path, path) if cmd == "weights" else write_reference(gguf_path, path))


if __name__ == "__main__":
    main()
