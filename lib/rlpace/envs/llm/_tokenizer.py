"""Tokenizers: the offline default, and one adapter over ``tokenizers`` and ``transformers``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlpace.envs.llm._history import DEFAULT_CHAT_TEMPLATE

__all__ = [
    "TextCodec",
    "as_transformers_tokenizer",
    "default_tokenizer",
    "load_tokenizer",
]

_ASSET = Path(__file__).resolve().parent / "assets" / "tokenizer.json"
_EOS_NAMES = ("<eos>", "</s>", "<|endoftext|>", "<|eos|>", "[SEP]")
_PAD_NAMES = ("<pad>", "[PAD]", "<|pad|>")


def default_tokenizer():
    """The small byte-level BPE tokenizer shipped with rlpace (512 tokens, offline).

    Digits are one token each; ``<pad>`` = 0, ``<eos>`` = 1 and the chat role markers
    ``<|system|>``, ``<|user|>``, ``<|assistant|>`` are special tokens. It is built
    by ``assets/build_tokenizer.py`` from a small local corpus. Every call returns a
    fresh ``tokenizers.Tokenizer``.

    Example:
        >>> tok = default_tokenizer()
        >>> tok.get_vocab_size(), tok.token_to_id("<eos>")
        (512, 1)
        >>> tok.decode(tok.encode("12 + 7").ids)
        '12 + 7'
    """
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(_ASSET))


def as_transformers_tokenizer(tokenizer: Any = None):
    """Wrap a ``tokenizers.Tokenizer`` (default: :func:`default_tokenizer`) as a
    ``transformers.PreTrainedTokenizerFast`` with pad/EOS tokens and a chat template.

    Example:
        >>> hf = as_transformers_tokenizer()
        >>> hf.pad_token_id, hf.eos_token_id
        (0, 1)
        >>> hf.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
        ...                        add_generation_prompt=True)
        '<|user|>Hi\\n<|assistant|>'
    """
    from transformers import PreTrainedTokenizerFast

    tok = default_tokenizer() if tokenizer is None else tokenizer
    if isinstance(tok, PreTrainedTokenizerFast):
        return tok
    if not hasattr(tok, "encode_batch"):
        raise TypeError(
            f"expected a tokenizers.Tokenizer to wrap, got {type(tok).__name__}; "
            "pass default_tokenizer() or a Tokenizer loaded from a local tokenizer.json"
        )
    kwargs: dict[str, Any] = {}
    eos = _find_token(tok, _EOS_NAMES)
    pad = _find_token(tok, _PAD_NAMES)
    if eos is not None:
        kwargs["eos_token"] = eos
    if pad is not None:
        kwargs["pad_token"] = pad
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs)
    hf.chat_template = DEFAULT_CHAT_TEMPLATE
    return hf


def load_tokenizer(path: str | Path):
    """Load a tokenizer from a *local* ``tokenizer.json`` file or a directory holding one.

    rlpace never downloads: a hub name such as ``"gpt2"`` raises, saying how to get
    a local file instead.

    Example:
        >>> from pathlib import Path
        >>> import rlpace.envs.llm as llm
        >>> p = Path(llm.__file__).parent / "assets" / "tokenizer.json"
        >>> load_tokenizer(p).get_vocab_size()
        512
        >>> load_tokenizer("gpt2")
        Traceback (most recent call last):
        ...
        FileNotFoundError: load_tokenizer reads local files only and never downloads; 'gpt2' is not a tokenizer.json file or a directory holding one. Save the tokenizer once where you have network access (tokenizer.save_pretrained(dir)) and pass that directory, or use default_tokenizer().
    """
    from tokenizers import Tokenizer

    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise FileNotFoundError(
            "load_tokenizer reads local files only and never downloads; "
            f"{str(path)!r} is not a tokenizer.json file or a directory holding one. "
            "Save the tokenizer once where you have network access "
            "(tokenizer.save_pretrained(dir)) and pass that directory, or use default_tokenizer()."
        )
    return Tokenizer.from_file(str(p))


def _find_token(tok: Any, names: Sequence[str]) -> str | None:
    for name in names:
        if tok.token_to_id(name) is not None:
            return name
    return None


class TextCodec:
    """One interface over a ``tokenizers.Tokenizer`` and a ``transformers`` fast tokenizer.

    Encoding and decoding go through the Rust backend in batches, without special
    tokens added. Decoding is UTF-8 with replacement: token ids whose bytes do not
    form valid UTF-8 (e.g. half of a multi-byte character) decode to U+FFFD ``'�'``,
    never an exception. Token ids outside the vocabulary raise ``ValueError``.

    Args:
        tokenizer: a ``tokenizers.Tokenizer`` or a ``transformers.PreTrainedTokenizerFast``.
        eos_token_id: overrides the tokenizer's EOS id.

    Example:
        >>> codec = TextCodec(default_tokenizer())
        >>> ids = codec.encode_batch(["ab", "What is 1 + 2?"])
        >>> codec.decode_batch(ids)
        ['ab', 'What is 1 + 2?']
        >>> codec.pad_token_id, codec.eos_token_id, codec.vocab_size
        (0, 1, 512)
    """

    def __init__(self, tokenizer: Any, eos_token_id: int | None = None) -> None:
        if isinstance(tokenizer, (str, Path)):
            raise TypeError(
                f"got the name {str(tokenizer)!r} where a tokenizer object was expected; rlpace "
                "never downloads models or tokenizers. Pass default_tokenizer(), "
                "load_tokenizer(local_path) or a transformers fast tokenizer object."
            )
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is not None:  # transformers PreTrainedTokenizerFast
            self.backend = backend
            self.pad_token_id = tokenizer.pad_token_id
            self.eos_token_id = tokenizer.eos_token_id
            self.chat_template = getattr(tokenizer, "chat_template", None)
            specials = {
                k: v for k, v in (tokenizer.special_tokens_map or {}).items() if isinstance(v, str)
            }
        elif hasattr(tokenizer, "encode_batch") and hasattr(tokenizer, "decode_batch"):
            self.backend = tokenizer
            pad, eos = _find_token(tokenizer, _PAD_NAMES), _find_token(tokenizer, _EOS_NAMES)
            self.pad_token_id = None if pad is None else tokenizer.token_to_id(pad)
            self.eos_token_id = None if eos is None else tokenizer.token_to_id(eos)
            self.chat_template = None
            specials = {"eos_token": eos or "", "pad_token": pad or ""}
        else:
            raise TypeError(
                "expected a tokenizers.Tokenizer or a transformers fast tokenizer "
                f"(PreTrainedTokenizerFast), got {type(tokenizer).__name__}; slow (Python) "
                "tokenizers are not supported: load the fast one (use_fast=True)"
            )
        if eos_token_id is not None:
            self.eos_token_id = int(eos_token_id)
        self.special_tokens = specials
        # ``encode_batch_fast`` (tokenizers >= 0.21) skips the character offsets we never use
        self._encode_batch = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)
        self.vocab_size = self.backend.get_vocab_size(with_added_tokens=True)
        self.eos_token = (
            None if self.eos_token_id is None else self.backend.id_to_token(self.eos_token_id)
        )

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, no special tokens added.

        Text that is not valid Unicode (a lone surrogate, e.g. from bytes decoded with
        ``errors="surrogateescape"``) raises ``ValueError`` naming the text.

        Example:
            >>> TextCodec(default_tokenizer()).encode_batch(["12", "<eos>"])
            [[21, 22], [1]]
        """
        texts = list(texts)
        try:
            encoded = self._encode_batch(texts, add_special_tokens=False)
        except (TypeError, ValueError, UnicodeError) as exc:
            for i, text in enumerate(texts):
                if not isinstance(text, str):
                    raise TypeError(
                        f"text {i} to tokenize is a {type(text).__name__}, expected str; "
                        "decode bytes first (data.decode('utf-8', errors='replace'))"
                    ) from exc
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as bad:
                    raise ValueError(
                        f"text {i} is not valid Unicode (character {bad.start} is a lone "
                        f"surrogate {text[bad.start]!r}); decode its bytes with "
                        "errors='replace' instead of 'surrogateescape'"
                    ) from exc
            raise
        return [e.ids for e in encoded]

    def decode_batch(
        self, ids: Sequence[Sequence[int]], skip_special_tokens: bool = False
    ) -> list[str]:
        """Text of each id sequence; invalid UTF-8 becomes U+FFFD (see class docs).

        Example:
            >>> codec = TextCodec(default_tokenizer())
            >>> codec.decode_batch([[21, 22, 1]]), codec.decode_batch([[21, 22, 1]], True)
            (['12<eos>'], ['12'])
        """
        lists = [list(map(int, x)) for x in ids]
        for row, seq in enumerate(lists):
            if seq and (min(seq) < 0 or max(seq) >= self.vocab_size):
                bad = next(t for t in seq if t < 0 or t >= self.vocab_size)
                raise ValueError(
                    f"token id {bad} in sequence {row} is outside the tokenizer's vocabulary "
                    f"[0, {self.vocab_size}); the action was produced for another vocabulary "
                    "(check the model's vocab_size against the tokenizer's)"
                )
        return self.backend.decode_batch(lists, skip_special_tokens=skip_special_tokens)
