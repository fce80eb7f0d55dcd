import pytest

from rlpace.envs.llm import (
    DEFAULT_CHAT_TEMPLATE,
    History,
    Message,
    as_transformers_tokenizer,
    render_chat,
)


def _chat():
    return (
        History()
        .append("system", "Be brief.")
        .append("user", "What is 2 + 2?")
        .append("assistant", "#### 4")
        .append("user", "And 3 + 3?")
    )


@pytest.mark.parametrize("gen", [True, False])
def test_default_fast_path_matches_the_jinja_template_and_transformers(gen):
    h = _chat()
    fast = render_chat(h, None, add_generation_prompt=gen)
    # the same template string, but forced through Jinja (a trailing comment defeats the fast path)
    jinja = render_chat(h, DEFAULT_CHAT_TEMPLATE + "{# same #}", add_generation_prompt=gen)
    hf = as_transformers_tokenizer().apply_chat_template(
        h.to_chat(), tokenize=False, add_generation_prompt=gen
    )
    assert fast == jinja == hf
    assert fast.startswith("<|system|>Be brief.\n<|user|>What is 2 + 2?\n<|assistant|>#### 4\n")
    assert fast.endswith("<|assistant|>") is gen


def test_custom_template_gets_messages_and_special_tokens():
    tmpl = "{% for m in messages %}{{ m['role'][0] }}:{{ m['content'] }}{{ eos_token }}{% endfor %}"
    out = render_chat(_chat(), tmpl, special_tokens={"eos_token": "</s>"})
    assert out == "s:Be brief.</s>u:What is 2 + 2?</s>a:#### 4</s>u:And 3 + 3?</s>"


def test_history_is_immutable_and_round_trips_chat_format():
    h = History.from_chat([{"role": "user", "content": "Hi"}])
    h2 = h.append("assistant", "Hello")
    assert len(h) == 1 and len(h2) == 2
    assert History.from_chat(h2.to_chat()) == h2
    with pytest.raises(AttributeError):
        h.messages = ()


def test_bad_messages_and_templates_are_explained():
    with pytest.raises(TypeError, match="must be str"):
        Message("user", 3)
    with pytest.raises(ValueError, match="'role' and 'content'"):
        History.from_chat([{"role": "user"}])
    with pytest.raises(ValueError, match="does not parse as Jinja"):
        render_chat(_chat(), "{% for m in messages %}")
