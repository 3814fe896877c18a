// Writes tiktoken ranks files from the npm package js-tiktoken's encodings, for the tests of
// this project's tiktoken loader (engine/text/bpe_tokenizer.hpp: BpeTokenizer::from_tiktoken):
// for each of cl100k_base and o200k_base, OUT/<name>.tiktoken (one "<base64 token> <rank>" per
// line, the format of OpenAI's published files and Moonshot's tiktoken.model) and
// OUT/<name>.json ({"pat_str", "special_tokens"}). scripts/setup.sh runs it when it fetches the
// test data:
//   node tiktoken_ranks.mjs PACKAGE_DIR OUT
// PACKAGE_DIR: an unpacked js-tiktoken package (its dist/ranks/*.js).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [pkg, out] = process.argv.slice(2);
fs.mkdirSync(out, { recursive: true });
for (const name of ["cl100k_base", "o200k_base"]) {
  const file = path.join(pkg, "dist", "ranks", name + ".js");
  const ranks = (await import(pathToFileURL(file).href)).default;
  // js-tiktoken's compressed form: lines of "<tag> <first rank> <token> <token> …", the tokens'
  // ranks consecutive from the first.
  const lines = [];
  for (const line of ranks.bpe_ranks.split("\n")) {
    if (!line) continue;
    const [, offset, ...tokens] = line.split(" ");
    tokens.forEach((t, i) => lines.push(t + " " + (Number.parseInt(offset, 10) + i)));
  }
  fs.writeFileSync(path.join(out, name + ".tiktoken"), lines.join("\n") + "\n");
  fs.writeFileSync(path.join(out, name + ".json"),
                   JSON.stringify({ pat_str: ranks.pat_str, special_tokens: ranks.special_tokens }));
}
