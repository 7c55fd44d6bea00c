"""The tricky strings every tokenizer reference is computed on (Unicode,
code, digit and whitespace runs, special-token look-alikes, chat markers):
tests/tokenizer/make_reference.py and tests/python/smollm2_reference.py."""

LONG_PARAGRAPH = (
  "The KV cache stores, for every layer and every attention head, the keys and values of all the tokens "
  "seen so far. Eviction policies such as StreamingLLM keep a few \"sink\" tokens at the start plus a recent "
  "window; H2O keeps the heavy hitters, i.e. the tokens that accumulated the most attention. In 2023, "
  "researchers showed that 20% of the cache could retain 95% of the quality on long-context benchmarks "
  "(LongBench, Needle-in-a-Haystack). However, the needle — \"The code for the red door is 4821.\" — is "
  "exactly the kind of token that a recency window forgets!\n\nThis paragraph is deliberately long: it "
  "mixes punctuation (commas, semicolons; colons: dashes - and quotes 'like this'), numbers (3.14159, "
  "1,000,000, 2^10 = 1024), and words in several cases: lower, UPPER, Title, camelCase, snake_case, "
  "kebab-case. Ça marche aussi en français, auf Deutsch übrigens auch, y en español también.")

PYTHON_CODE = (
  "def fib(n: int) -> int:\n"
  "    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
  "    a, b = 0, 1\n"
  "    for _ in range(n):\n"
  "        a, b = b, a + b\n"
  "    return a\n\n"
  "if __name__ == '__main__':\n"
  "\tprint(fib(10))  # 55\n")

CPP_CODE = (
  "#include <vector>\n"
  "template <typename T> std::vector<T> keep(const std::vector<T>& v) {\n"
  "  std::vector<T> out; for (auto& x : v) { if (x != T{}) out.push_back(x); }\n"
  "  return out; // a->b, i++, x <<= 2, y >>= 1, p && q || !r\n"
  "}\r\n")

STRINGS = [
  "",
  "Hello world",
  " Hello world",
  "Hello world ",
  "   leading spaces and trailing   ",
  "a",
  " ",
  "\n",
  "\t",
  "\n\n\n",
  "    ",
  "Hello,  world!\tTabs\tand\nnewlines\r\nCRLF\r\rCR",
  "a  b   c    d\t\t e\n\n\nf \n g \t\n",
  "Ünïcödé àccénts: café, naïve, Straße, Ångström, Ærøskøbing",
  "Decomposed: e\u0301 cafe\u0301 A\u030A o\u0308\u0304 \u1100\u1161\u11A8",
  "你好，世界！今天天气很好。",
  "日本語のテキストとカタカナ、ひらがな。",
  "안녕하세요 세계",
  "Привет мир! Γειά σου Κόσμε! שלום עולם مرحبا بالعالم",
  "नमस्ते दुनिया สวัสดีชาวโลก",
  "I ❤️ emoji 😀🎉🚀",
  "Family: 👨‍👩‍👧‍👦, flags: 🇺🇸🇯🇵, skin: 👍🏽 👩🏿‍💻",
  "1 12 123 1234 12345 1234567890 3.14159 1,000,000",
  "Year 2024: 99 bottles; 0007 agents; ١٢٣ arabic digits; ½ ² ⅷ",
  "I'M HERE, YOU'RE there, it's 'quoted' and WE'LL see, she'd've DON'T won't",
  "'S 'T 'Re 'vE 'M 'LL 'D's't",
  "<s> hello </s> <unk>",
  "<|begin_of_text|>Hello<|end_of_text|>",
  "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
  "<|endoftext|>text after<|endoftext|><|endoftext|>",
  "<think>\nreasoning\n</think>\n\nanswer",
  "<|begin_of_text> <s > < s> <|im_start| <|endoftext",
  "<s><s></s>",
  PYTHON_CODE,
  CPP_CODE,
  '{"key": [1, 2.5e-3, null], "nested": {"a": "b"}}',
  "https://example.com/path?q=1&r=2#frag user@example.org",
  LONG_PARAGRAPH,
  "∑_{i=1}^{n} x² ≤ ∞ → ∀x∈ℝ, √2 ≈ 1.414",
  "Wait... what?!?! --- (yes) [no] {maybe} ***bold*** ___",
  "▁already▁has▁metaspace ▁ ▁▁",
  "Rare: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓀀 ꙮ \U0010FFFD",
  "HELLO World hElLo",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa ================================",
  "zero\u200Bwidth\u200Cjoin\u200Dhere",
  "non\u00A0breaking\u2003em\u3000ideographic\u2028line",
  "Ġ Ċ ĉ ▁ <0x0A> <0xFF>",
  "hello<s>world</s>again<|endoftext|>more<|im_end|>end",
  "abc123def x1y22z333 v2.0.1-rc3 0x1F 1e-9",
  "foo  \n  bar \n\n baz\t\n\tqux   \r\n",
  "\u0301leading combining mark, Angstrom \u212B, Ohm \u2126, ligature \uFB01, half-width \uFF76",
  "'hello' \"world\" don't' ''quoted'' it''s",
  ]
