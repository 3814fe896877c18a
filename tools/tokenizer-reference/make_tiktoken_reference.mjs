// Reference token ids for tests/data/tiktoken_reference.json: the npm package js-tiktoken's
// cl100k_base and o200k_base encodings (an independent implementation of tiktoken) of the
// strings below, special tokens allowed. Run with Node.js 20:
//   npm install js-tiktoken@1.0.21 && node make_tiktoken_reference.mjs > tiktoken_reference.json
import { getEncoding } from "js-tiktoken";

const strings = [
  "",
  "Hello, world!",
  "The quick brown fox jumps over the lazy dog.",
  "I'm sure they'll say we've done it; DON'T you think so? It's John's.",
  "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
  "{\"name\": \"fp8rl\", \"values\": [1, 2.5, -3e-4], \"ok\": true}",
  "Solve $x^2 - 5x + 6 = 0$. Then \\frac{a}{b} = \\sqrt{\\alpha^2}, so \\boxed{42}.",
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
  "Café, naïve, coöperate",
  "Cafe\u0301 (a combining mark)",
  "HTTPServer parsesJSONQuickly andCamelCase",
  "https://example.org/path?q=1&r=two#frag",
  "text<|endoftext|>more text",
  "----- ===== ***** ~~~~~",
  "Ελληνικά και русский текст",
  "😀",
  " ",
  "\n",
];
const out = { generator: "make_tiktoken_reference.mjs", package: "js-tiktoken@1.0.21", encodings: {} };
for (const name of ["cl100k_base", "o200k_base"]) {
  const enc = getEncoding(name);
  out.encodings[name] = strings.map((s) => ({ text: s, ids: enc.encode(s, "all") }));
}
console.log(JSON.stringify(out, null, 1));
