#!/usr/bin/env python3
"""Renders conversations with the BitNet b1.58 2B4T instruct model's chat
template through Jinja2 (as Hugging Face transformers' apply_chat_template
does: a sandboxed environment, trim_blocks and lstrip_blocks) and encodes the
result with Hugging Face `tokenizers` (special tokens recognised, BOS
included in the text). Input: a JSON list of {"messages": [{"role", "content"}],
"add_generation_prompt": bool}; output: a JSON list of {"text", "ids"}.

    python3 tests/tok/chat_template.py IN.json OUT.json tokenizer.json

Exit status 3 when jinja2 or `tokenizers` cannot be imported (the C++ test skips).
"""
import json
import sys

try:
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from tokenizers import Tokenizer
except ImportError:
    sys.exit(3)

# microsoft/bitnet-b1.58-2B-4T tokenizer_config.json "chat_template".
TEMPLATE = ("{% for message in messages %}{% set content = message['role'] | capitalize + ': '+ "
            "message['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}"
            "{% if add_generation_prompt %}{{ 'Assistant: ' }}{% endif %}")


def main():
    src, dst, tj = sys.argv[1:4]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    tmpl = env.from_string(TEMPLATE)
    tok = Tokenizer.from_file(tj)
    out = []
    for conv in json.load(open(src, encoding="utf-8")):
        text = "<|begin_of_text|>" + tmpl.render(messages=conv["messages"],
                                                 add_generation_prompt=conv["add_generation_prompt"])
        out.append({"text": text, "ids": tok.encode(text, add_special_tokens=False).ids})
    json.dump(out, open(dst, "w", encoding="utf-8"), ensure_ascii=False)


if __name__ == "__main__":
    main()
