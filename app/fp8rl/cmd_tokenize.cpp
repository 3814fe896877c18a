// fp8rl tokenize: a model folder's tokenizer (tokenizer.json) on the command line, to check our
// ids against the tokenizer a user knows.
#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "text/bpe_tokenizer.hpp"

namespace fp8rl::cli {

int cmd_tokenize(const std::vector<std::string>& args) {
  const Args a(args, {"model", "text", "file", "decode"},
               {"help", "special", "no-special", "skip-special"});
  const int sources = a.has("text") + a.has("file") + a.has("decode");
  if (a.flag("help"))
    return print_help(
        "usage: fp8rl tokenize --model DIR (--text S | --file F) [--special | --no-special]\n"
        "       fp8rl tokenize --model DIR --decode 1,2,3 [--skip-special]\n\n"
        "Encodes text with the tokenizer of a Hugging Face model folder (its tokenizer.json and\n"
        "tokenizer_config.json; a folder holding only those will do) and prints the token ids\n"
        "as a JSON array: the ids `train`, `generate` and `score` use. Added tokens such as\n"
        "<|im_start|> are recognised in the text (--special, the default, as Hugging Face\n"
        "does); --no-special reads special ones as plain text. --decode prints the text of\n"
        "ids (--skip-special leaves special tokens out).\n");
  need(!a.get("model", "").empty(), "needs --model DIR, the folder with the tokenizer");
  need(sources == 1, sources == 0 ? "needs what to tokenize: --text S, --file F or --decode 1,2,3"
                                  : "give one of --text, --file and --decode");
  need(!(a.flag("special") && a.flag("no-special")), "give --special or --no-special, not both");
  a.max_positional(0);
  const BpeTokenizer tok = BpeTokenizer::load(a.get("model", ""));
  if (a.has("decode")) {
    const std::string text =
        tok.decode(parse_token_ids(a.get("decode", ""), "--decode"), a.flag("skip-special"));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  const std::string text = a.has("text") ? a.get("text", "") : read_text_file(a.get("file", ""));
  Json::Array ids;
  for (int32_t id : tok.encode(text, !a.flag("no-special"))) ids.push_back(Json(id));
  std::printf("%s\n", Json(std::move(ids)).dump().c_str());
  return 0;
}

}  // namespace fp8rl::cli
