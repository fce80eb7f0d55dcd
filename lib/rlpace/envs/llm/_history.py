"""Chat histories and their rendering to prompt text."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["DEFAULT_CHAT_TEMPLATE", "History", "Message", "render_chat"]

#: The template used when a tokenizer has none (a Jinja string in the Hugging Face
#: chat-template convention). Each message is ``<|role|>content`` and a newline; the
#: generation prompt is ``<|assistant|>``. The three role markers are special tokens
#: of the default tokenizer, so they never merge with the text around them.
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@dataclass(frozen=True)
class Message:
    """One chat message.

    Attributes:
        role: who speaks: ``"system"``, ``"user"`` or ``"assistant"`` (any string is kept).
        content: what they say.

    Example:
        >>> Message("user", "What is 2 + 3?")
        Message(role='user', content='What is 2 + 3?')
    """

    role: str
    content: str

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or not isinstance(self.content, str):
            raise TypeError(
                "Message role and content must be str; got "
                f"role={type(self.role).__name__}, content={type(self.content).__name__}"
            )


@dataclass(frozen=True)
class History:
    """An immutable conversation: a tuple of :class:`Message`, oldest first.

    ``append`` returns a new history, so a history stored in an environment's output
    never changes under the reader's feet.

    Attributes:
        messages: the messages in order.

    Example:
        >>> h = History.from_chat([{"role": "user", "content": "Hi"}])
        >>> h = h.append("assistant", "Hello!")
        >>> len(h), h.messages[-1].role
        (2, 'assistant')
        >>> print(h.render(), end="")
        <|user|>Hi
        <|assistant|>Hello!
        <|assistant|>
    """

    messages: tuple[Message, ...] = ()

    @classmethod
    def from_chat(cls, chat: Iterable[Mapping[str, str]]) -> History:
        """Build a history from ``[{"role": ..., "content": ...}, ...]``.

        Example:
            >>> History.from_chat([{"role": "system", "content": "Be brief."}]).to_chat()
            [{'role': 'system', 'content': 'Be brief.'}]
        """
        out = []
        for i, m in enumerate(chat):
            if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
                raise ValueError(
                    f"chat message {i} must be a mapping with 'role' and 'content'; got {m!r}"
                )
            out.append(Message(m["role"], m["content"]))
        return cls(tuple(out))

    def append(self, role: str, content: str) -> History:
        """A new history with one more message at the end.

        Example:
            >>> len(History().append("user", "Hi"))
            1
        """
        return History((*self.messages, Message(role, content)))

    def to_chat(self) -> list[dict[str, str]]:
        """The messages as a list of ``{"role", "content"}`` dicts (the HF chat format).

        Example:
            >>> History().append("user", "Hi").to_chat()
            [{'role': 'user', 'content': 'Hi'}]
        """
        return [{"role": m.role, "content": m.content} for m in self.messages]

    def render(self, template: str | None = None, add_generation_prompt: bool = True) -> str:
        """The prompt text for this conversation; see :func:`render_chat`.

        Example:
            >>> History().append("user", "Hi").render(add_generation_prompt=False)
            '<|user|>Hi\\n'
        """
        return render_chat(self, template, add_generation_prompt=add_generation_prompt)

    def __len__(self) -> int:
        return len(self.messages)


def render_chat(
    history: History,
    template: str | None = None,
    *,
    add_generation_prompt: bool = True,
    special_tokens: Mapping[str, str] | None = None,
) -> str:
    """Render a conversation with a Jinja chat template (the Hugging Face convention).

    Args:
        history: the conversation.
        template: a chat template string, e.g. a tokenizer's ``chat_template``;
            ``None`` uses :data:`DEFAULT_CHAT_TEMPLATE`, rendered by a fast path.
        add_generation_prompt: end with the marker that opens the assistant's turn.
        special_tokens: extra template variables such as ``eos_token``.

    Returns:
        The rendered text.

    Example:
        >>> h = History().append("user", "2+2?")
        >>> render_chat(h, "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{% endfor %}")
        '[user] 2+2?'
    """
    if template is None or template == DEFAULT_CHAT_TEMPLATE:
        parts = [f"<|{m.role}|>{m.content}\n" for m in history.messages]
        if add_generation_prompt:
            parts.append("<|assistant|>")
        return "".join(parts)
    compiled = _compile(template)
    return compiled.render(
        messages=history.to_chat(),
        add_generation_prompt=add_generation_prompt,
        **dict(special_tokens or {}),
    )


@functools.lru_cache(maxsize=16)
def _compile(template: str):
    from jinja2.exceptions import TemplateSyntaxError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    try:
        return env.from_string(template)
    except TemplateSyntaxError as exc:
        raise ValueError(
            f"the chat template does not parse as Jinja ({exc}); fix the tokenizer's "
            "chat_template or pass the tokenizer without one to use DEFAULT_CHAT_TEMPLATE"
        ) from exc
