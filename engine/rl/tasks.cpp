#include "rl/tasks.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include "core/error.hpp"
#include "rl/math_answer.hpp"
#include "text/char_tokenizer.hpp"
#include "text/synthetic_tokenizer.hpp"

namespace fp8rl {

double partial_credit(const std::string& answer, const std::string& response, bool ended) {
  if (!ended) return 0.0;
  const size_t n = std::max(answer.size(), response.size());
  if (n == 0) return 1.0;
  size_t right = 0;
  for (size_t i = 0; i < std::min(answer.size(), response.size()); ++i)
    right += answer[i] == response[i];
  return static_cast<double>(right) / static_cast<double>(n);
}

double shaped_reward(const std::string& answer, const std::string& response, bool ended) {
  if (!ended) return 0.0;
  return 0.5 * partial_credit(answer, response, ended) + (response == answer ? 0.5 : 0.0);
}

Task::Task(const TaskConfig& cfg) : reward_(cfg.reward) {}

double Task::reward(const Example& ex, const std::string& response, bool ended) const {
  if (!ended) return 0.0;
  if (reward_ == "exact") return response == ex.answer ? 1.0 : 0.0;
  if (reward_ == "partial") return partial_credit(ex.answer, response, ended);
  return shaped_reward(ex.answer, response, ended);
}

std::vector<int64_t> Task::forced_response_lengths(const std::vector<int64_t>&, uint64_t) const {
  return {};
}

std::vector<int32_t> Task::encode_prompt(const std::string& prompt) const {
  return tokenizer_->encode_prompt(prompt);
}

namespace {

// A generated task: examples come from a seeded generator; the validation set is drawn first
// and excluded from training.
class GeneratedTask : public Task {
 public:
  GeneratedTask(std::string name, std::string symbols, const TaskConfig& cfg)
      : Task(cfg), name_(std::move(name)), cfg_(cfg) {
    check(cfg.reward != "numeric", "task.reward 'numeric' is for the jsonl task; " + name_ +
                                       " takes one of: auto, shaped, partial, exact");
    check(cfg.reward != "math", "task.reward 'math' is for the jsonl task; " + name_ +
                                    " takes one of: auto, shaped, partial, exact");
    if (reward_ == "auto") reward_ = "shaped";
    tokenizer_ = std::make_shared<CharTokenizer>(symbols);
  }
  std::string name() const override { return name_; }

  void build_validation() {
    Rng rng(cfg_.seed ^ 0x5eedba11ull);
    std::set<std::string> seen;
    int attempts = 0;
    while (static_cast<int64_t>(validation_.size()) < cfg_.validation_size && attempts++ < 100000) {
      Example ex = make(rng);
      if (seen.insert(ex.prompt).second) validation_.push_back(ex);
    }
    held_out_ = seen;
  }

  Example sample(Rng& rng) const override {
    for (int i = 0; i < 1000; ++i) {
      Example ex = make(rng);
      if (!held_out_.count(ex.prompt)) return ex;
    }
    throw Error("task " + name_ +
                ": the validation set covers every prompt; shrink task.validation_size");
  }

 protected:
  virtual Example make(Rng& rng) const = 0;
  int64_t length(Rng& rng) const {
    return cfg_.min_len + static_cast<int64_t>(
                              rng.next() % static_cast<uint64_t>(cfg_.max_len - cfg_.min_len + 1));
  }
  std::string name_;
  TaskConfig cfg_;
  std::set<std::string> held_out_;
};

// A string of length(rng) symbols → the answer that `solve` gives for it, e.g.
// reverse: "dcab=" → "bacd" (letters a–h); sort: "4170=" → "0147" (digits, ascending).
class StringTask : public GeneratedTask {
 public:
  using Solve = std::string (*)(const std::string&);
  // Symbols: the `count` characters from `first` on, and the prompt's closing '='.
  StringTask(std::string name, char first, int count, Solve solve, const TaskConfig& c)
      : GeneratedTask(std::move(name), symbols(first, count), c),
        first_(first),
        count_(count),
        solve_(solve) {
    build_validation();
  }
  int64_t max_response_tokens() const override { return cfg_.max_len + 1; }

  static std::string reversed(const std::string& s) { return {s.rbegin(), s.rend()}; }
  static std::string sorted(const std::string& s) {
    std::string out = s;
    std::sort(out.begin(), out.end());
    return out;
  }

 protected:
  Example make(Rng& rng) const override {
    std::string s;
    for (int64_t i = length(rng); i > 0; --i)
      s += static_cast<char>(first_ + rng.next() % static_cast<uint64_t>(count_));
    return {s + "=", solve_(s)};
  }

 private:
  static std::string symbols(char first, int count) {
    std::string out;
    for (int i = 0; i < count; ++i) out += static_cast<char>(first + i);
    return out + "=";
  }
  char first_;
  int count_;
  Solve solve_;
};

// "37+485=" → "522": add two numbers of min_len…max_len digits (answers written plainly).
class AdditionTask : public GeneratedTask {
 public:
  explicit AdditionTask(const TaskConfig& c) : GeneratedTask("addition", "0123456789+=", c) {
    check(c.max_len <= 9, "task.max_len must be ≤ 9 for addition");
    build_validation();
  }
  int64_t max_response_tokens() const override { return cfg_.max_len + 2; }

 protected:
  Example make(Rng& rng) const override {
    auto number = [&] {
      const int64_t digits = length(rng);
      int64_t lo = 1;
      for (int64_t i = 1; i < digits; ++i) lo *= 10;
      const int64_t hi = lo * 10 - 1;
      return (digits == 1 ? 0 : lo) +
             static_cast<int64_t>(rng.next() %
                                  static_cast<uint64_t>(hi - (digits == 1 ? 0 : lo) + 1));
    };
    const int64_t a = number(), b = number();
    return {std::to_string(a) + "+" + std::to_string(b) + "=", std::to_string(a + b)};
  }
};

// The benchmarks' task: a model of a real model's shape on a real workload's lengths, with no
// model folder and no dataset. Prompts are min_len…max_len random tokens of a vocabulary of
// task.vocab_size (SyntheticTokenizer); each response is forced to a length drawn from
// [response_tokens_min, max_response_tokens] (random weights would end at a random <eos>). The
// reward is the share of the response's tokens with an even id — a deterministic function of
// what was sampled, so a group's rewards differ and GRPO has advantages to train on; there is no
// right answer (accuracy 0).
class SyntheticTask : public Task {
 public:
  explicit SyntheticTask(const TaskConfig& c) : Task(c), cfg_(c) {
    check(c.vocab_size >= 4 && c.vocab_size <= (int64_t{1} << 30),
          "task.vocab_size must be in [4, 2^30] for the synthetic task, got " +
              std::to_string(c.vocab_size));
    check(c.max_response_tokens >= 1,
          "task.max_response_tokens must be ≥ 1 for the synthetic task (every response's length)");
    check(c.response_tokens_min >= 0 && c.response_tokens_min <= c.max_response_tokens,
          "task.response_tokens_min must be in [0, task.max_response_tokens]");
    tokenizer_ = std::make_shared<SyntheticTokenizer>(static_cast<int32_t>(c.vocab_size));
    Rng rng(c.seed ^ 0x5eedba11ull);
    for (int64_t i = 0; i < c.validation_size; ++i) validation_.push_back(make(rng));
  }
  std::string name() const override { return "synthetic"; }
  Example sample(Rng& rng) const override { return make(rng); }
  double reward(const Example&, const std::string& response, bool) const override {
    const auto ids = tokenizer_->encode(response);
    if (ids.empty()) return 0.0;
    double even = 0;
    for (int32_t id : ids) even += id % 2 == 0;
    return even / static_cast<double>(ids.size());
  }
  bool correct(const Example&, const std::string&, bool) const override { return false; }
  int64_t max_response_tokens() const override { return cfg_.max_response_tokens; }
  std::vector<int64_t> forced_response_lengths(const std::vector<int64_t>& sequences,
                                               uint64_t seed) const override {
    const int64_t lo =
        cfg_.response_tokens_min > 0 ? cfg_.response_tokens_min : cfg_.max_response_tokens;
    std::vector<int64_t> n;
    for (int64_t s : sequences) {
      // Seeded by the sequence's index in the step: every rank forces what one rank would.
      Rng rng(seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(s) + 0x1e57ull);
      n.push_back(lo + static_cast<int64_t>(
                           rng.next() % static_cast<uint64_t>(cfg_.max_response_tokens - lo + 1)));
    }
    return n;
  }

 private:
  Example make(Rng& rng) const {
    const int64_t n =
        cfg_.min_len +
        static_cast<int64_t>(rng.next() % static_cast<uint64_t>(cfg_.max_len - cfg_.min_len + 1));
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i)
      ids.push_back(3 +
                    static_cast<int32_t>(rng.next() % static_cast<uint64_t>(cfg_.vocab_size - 3)));
    return {tokenizer_->decode(ids), ""};
  }
  TaskConfig cfg_;
};

// Prompts and answers from a JSON-lines file: {"prompt": "...", "answer": "..."} per line, or
// the keys task.prompt_key and task.answer_key name (optional "split": "train" | "validation";
// without it the last 10% validate). With task.reward math the stored answer is the
// reference's final answer (its last \boxed{…}, else what follows "####", else all of it).
class JsonlTask : public Task {
 public:
  explicit JsonlTask(const TaskConfig& c) : Task(c), cfg_(c) {
    check(!c.path.empty(), "task.path is required for the jsonl task");
    check(c.max_response_tokens > 0 || !c.tokenizer,
          "task.max_response_tokens must be set with a model's tokenizer (the response budget)");
    if (reward_ == "auto") reward_ = "exact";
    std::ifstream in(c.path);
    check(in.good(), "task.path: cannot open " + c.path);
    std::string line, symbols;
    std::set<char> chars;
    std::vector<Example> all, val;
    bool explicit_split = false;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      Json j;
      try {
        j = Json::parse(line);
      } catch (const Error& e) {
        throw Error(c.path + ":" + std::to_string(n) + ": not valid JSON: " + e.message());
      }
      auto field = [&](const char* key) -> std::string {
        if (!j.is_object() || !j.contains(key))
          throw Error(c.path + ":" + std::to_string(n) + ": missing \"" + key + "\"");
        const Json& v = j.at(key);
        if (v.is_number()) {
          const double d = v.as_number();
          return d == std::floor(d) ? std::to_string(static_cast<int64_t>(d)) : Json(d).dump();
        }
        if (!v.is_string())
          throw Error(c.path + ":" + std::to_string(n) + ": \"" + key +
                      "\" must be a string or number");
        return v.as_string();
      };
      Example ex{field(c.prompt_key.c_str()), field(c.answer_key.c_str())};
      if (ex.prompt.empty()) throw Error(c.path + ":" + std::to_string(n) + ": empty prompt");
      if (!c.instruction.empty()) ex.prompt += "\n" + c.instruction;
      if (reward_ == "math") {
        ex.answer = final_answer(ex.answer).value_or(ex.answer);
        if (normalize_answer(ex.answer).empty())
          throw Error(c.path + ":" + std::to_string(n) + ": \"" + c.answer_key +
                      "\" has no final answer (task.reward math)");
      }
      if (reward_ == "numeric") {
        char* end = nullptr;
        std::strtod(ex.answer.c_str(), &end);
        if (ex.answer.empty() || *end)
          throw Error(c.path + ":" + std::to_string(n) + ": answer \"" + ex.answer +
                      "\" is not a number (task.reward numeric)");
      }
      for (char ch : ex.prompt + ex.answer) chars.insert(ch);
      const bool is_val = j.contains("split") && j.at("split").as_string("split") == "validation";
      explicit_split |= j.contains("split");
      (is_val ? val : all).push_back(ex);
    }
    check(!all.empty(), c.path + ": no examples");
    if (!explicit_split) {
      const size_t n_val = std::max<size_t>(1, all.size() / 10);
      val.assign(all.end() - static_cast<int64_t>(n_val), all.end());
      all.resize(all.size() - n_val);
    }
    check(!all.empty(), c.path + ": no training examples left after the validation split");
    if (c.tokenizer) {
      tokenizer_ = c.tokenizer;
    } else {
      for (char ch : chars) symbols += ch;
      tokenizer_ = std::make_shared<CharTokenizer>(symbols);
    }
    train_ = std::move(all);
    validation_ = std::move(val);
    for (const auto& e : train_)
      longest_ = std::max<int64_t>(longest_, static_cast<int64_t>(e.answer.size()));
    for (const auto& e : validation_)
      longest_ = std::max<int64_t>(longest_, static_cast<int64_t>(e.answer.size()));
  }
  std::string name() const override { return "jsonl"; }
  Example sample(Rng& rng) const override { return train_[rng.next() % train_.size()]; }
  int64_t max_response_tokens() const override {
    return cfg_.max_response_tokens > 0 ? cfg_.max_response_tokens : longest_ + 1;
  }
  double reward(const Example& ex, const std::string& response, bool ended) const override {
    if (reward_ == "math")
      return ended && answers_match(final_answer(response).value_or(""), ex.answer) ? 1.0 : 0.0;
    if (reward_ != "numeric") return Task::reward(ex, response, ended);
    if (!ended) return 0.0;
    char* end = nullptr;
    const double got = std::strtod(response.c_str(), &end);
    if (response.empty() || *end) return 0.0;
    return std::fabs(got - std::strtod(ex.answer.c_str(), nullptr)) <= cfg_.numeric_tolerance ? 1.0
                                                                                              : 0.0;
  }
  bool correct(const Example& ex, const std::string& response, bool ended) const override {
    if (reward_ != "numeric" && reward_ != "math") return Task::correct(ex, response, ended);
    return reward(ex, response, ended) >= 1.0;
  }

 private:
  TaskConfig cfg_;
  std::vector<Example> train_;
  int64_t longest_ = 1;
};

}  // namespace

std::unique_ptr<Task> make_task(const TaskConfig& c) {
  if (c.name != "jsonl") {
    check(c.min_len >= 1 && c.max_len >= c.min_len,
          "task.min_len and task.max_len must satisfy 1 ≤ min_len ≤ max_len");
    check(c.validation_size >= 1, "task.validation_size must be ≥ 1");
  }
  if (c.name == "reverse")
    return std::make_unique<StringTask>("reverse", 'a', 8, StringTask::reversed, c);
  if (c.name == "sort") return std::make_unique<StringTask>("sort", '0', 10, StringTask::sorted, c);
  if (c.name == "addition") return std::make_unique<AdditionTask>(c);
  if (c.name == "jsonl") return std::make_unique<JsonlTask>(c);
  if (c.name == "synthetic") return std::make_unique<SyntheticTask>(c);
  throw Error("task.name '" + c.name +
              "' is not one of: reverse, addition, sort, jsonl, synthetic");
}

}  // namespace fp8rl
