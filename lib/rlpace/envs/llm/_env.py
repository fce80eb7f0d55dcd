"""``LLMEnv``: prompts on reset, generated text or tokens as actions, rewards from a function."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import torch
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    lazy_stack,
)
from torchrl.data import Categorical, Composite, NonTensor, Unbounded
from torchrl.envs import EnvBase

from rlpace.envs.llm._history import History, render_chat
from rlpace.envs.llm._tokenizer import TextCodec

__all__ = ["LLMEnv"]

RewardFn = Callable[[str, str, Mapping[str, Any]], float]


class LLMEnv(EnvBase):
    """A language-model environment with the torchrl ``EnvBase`` interface.

    On reset each batch element draws a sample from ``source``; its prompt becomes a
    :class:`History` (an optional system message, then the user's prompt) rendered
    to text with the tokenizer's chat template, or :data:`DEFAULT_CHAT_TEMPLATE`
    when it has none. A step takes the policy's response for every element, appends
    it to the history as the assistant's turn, scores it with ``reward_fn`` and
    renders the next prompt.

    Observations (batch ``[B]``):
        ``text`` (strings), ``history`` (:class:`History` objects), and with a tokenizer
        ``tokens`` and ``attention_mask``: ragged by default, the output is then a
        lazy stack of per-element tensordicts (torchrl's convention for ragged data):
        ``td[i]["tokens"]`` is element ``i``'s ids, ``td.get("tokens", as_list=True)``
        all of them, ``as_nested_tensor=True`` a jagged nested tensor; no padding
        anywhere. With ``padded=True``: ``[B, max_length]`` tensors *left*-padded with
        the pad token, and a boolean mask; the fixed width makes every step's output
        the same shape, so rollouts and collectors can stack them densely. Both
        layouts go through ``env.rollout`` and ``rlpace.collectors.Collector`` (a
        ragged batch comes out as a lazy stack). ``prompt_truncated`` (``[B, 1]``) is
        True where the prompt was cut to ``max_length`` tokens (see below).

    Actions:
        ``text_response`` (one string per element) or ``tokens_response`` (ragged
        nested tensor, a list of 1-D tensors, or a ``[B, T]`` tensor right-padded
        with pad/EOS ids, optionally with a ``response_mask``). With a tokenizer
        either may be given, the other is filled in; when both are present both are
        taken as they are. The response ends at its first EOS token.

    Episode end (``done`` = ``terminated`` | ``truncated``, each ``[B, 1]``):
        ``terminated`` when the response contains EOS or after ``max_turns`` responses;
        ``truncated`` when the next prompt is longer than ``max_length`` tokens
        (characters without a tokenizer). Prompts longer than ``max_length`` at reset
        raise with ``on_overflow="error"``; with ``"truncate"`` (the default) they keep
        their *last* ``max_length`` tokens (the end holds the generation prompt), the
        ``text`` is the decoded kept part and ``prompt_truncated`` is set. Without a
        tokenizer there is no EOS and lengths are counted in characters.

    Multi-turn: the next prompt is the whole conversation with a new assistant turn
    opened; tools or simulated users can append messages with a transform.

    Text: ids whose bytes are not valid UTF-8 (half a character) decode to U+FFFD.

    Resets may be partial (``_reset`` mask); the elements not reset keep their state.

    Args:
        source: the prompts, a sequence of strings, or a dataset: a sequence of
            mappings with a ``"prompt"`` string (e.g. :class:`ArithmeticDataset`);
            the whole sample is passed to ``reward_fn``.
        tokenizer: a ``tokenizers.Tokenizer`` or a ``transformers`` fast tokenizer, or
            ``None`` for a text-only environment.
        from_text: the action is ``text_response`` (True) or ``tokens_response``
            (False, needs a tokenizer).
        batch_size: number of episodes run side by side.
        max_length: the prompt budget in tokens (characters without a tokenizer).
        reward_fn: ``reward_fn(prompt, response, sample) -> float``; ``None`` rewards 0.
        max_turns: responses per episode.
        eos_token_id: the id that ends a response (default: the tokenizer's EOS).
        padded: padded tensors with masks instead of ragged nested tensors.
        on_overflow: ``"truncate"`` or ``"error"`` for prompts over ``max_length``.
        system_prompt: a system message put before every prompt.
        shuffle: draw samples in a random order (reseeded by ``set_seed``) rather
            than in order.

    Example:
        >>> from rlpace.envs.llm import LLMEnv, ArithmeticDataset, ExactMatchReward
        >>> from rlpace.envs.llm import default_tokenizer
        >>> env = LLMEnv(ArithmeticDataset(size=8, seed=0), tokenizer=default_tokenizer(),
        ...              batch_size=2, reward_fn=ExactMatchReward(), shuffle=False)
        >>> td = env.reset()
        >>> td["text"][0]
        '<|user|>What is 12 + 13?\\n<|assistant|>'
        >>> td[0]["tokens"].shape
        torch.Size([13])
        >>> td["text_response"] = ["#### 25", "#### 0"]
        >>> out = env.step(td)
        >>> out["next", "reward"].squeeze(-1).tolist(), out["next", "done"].squeeze(-1).tolist()
        ([1.0, 0.0], [True, True])
    """

    def __init__(
        self,
        source: Sequence[str] | Sequence[Mapping[str, Any]],
        *,
        tokenizer: Any = None,
        from_text: bool = True,
        batch_size: int = 1,
        max_length: int = 256,
        reward_fn: RewardFn | None = None,
        max_turns: int = 1,
        eos_token_id: int | None = None,
        padded: bool = False,
        on_overflow: Literal["truncate", "error"] = "truncate",
        system_prompt: str | None = None,
        shuffle: bool = True,
    ) -> None:
        if isinstance(source, (str, bytes)) or not isinstance(source, Sequence):
            raise TypeError(
                "LLMEnv needs a sequence of prompt strings or of samples with a 'prompt' "
                f"key; got {type(source).__name__}. Wrap a single prompt in a list."
            )
        if len(source) == 0:
            raise ValueError("LLMEnv got an empty source; pass at least one prompt")
        if isinstance(batch_size, torch.Size | tuple | list):
            if len(batch_size) != 1:
                raise ValueError(f"LLMEnv batch_size must be one number, got {tuple(batch_size)}")
            batch_size = int(batch_size[0])
        if batch_size < 1:
            raise ValueError(f"LLMEnv batch_size must be >= 1, got {batch_size}")
        if max_length < 1 or max_turns < 1:
            raise ValueError(
                f"LLMEnv needs max_length >= 1 and max_turns >= 1, got {max_length}, {max_turns}"
            )
        if on_overflow not in ("truncate", "error"):
            raise ValueError(f"on_overflow must be 'truncate' or 'error', got {on_overflow!r}")
        if reward_fn is not None and not callable(reward_fn):
            raise TypeError(f"reward_fn must be callable, got {type(reward_fn).__name__}")
        codec = None if tokenizer is None else TextCodec(tokenizer, eos_token_id=eos_token_id)
        if codec is None and (not from_text or padded):
            raise ValueError(
                "LLMEnv without a tokenizer is text-only: from_text=False and padded=True "
                "need token ids. Pass tokenizer=default_tokenizer() (or your own)."
            )
        if padded and codec is not None and codec.pad_token_id is None:
            raise ValueError(
                "padded=True needs a pad token, and the tokenizer has none. Add one "
                "(e.g. hf_tokenizer.pad_token = hf_tokenizer.eos_token) or use padded=False."
            )
        super().__init__(batch_size=torch.Size([batch_size]))
        self.source = source
        self.codec = codec
        self.from_text = from_text
        self.max_length = int(max_length)
        self.reward_fn = reward_fn
        self.max_turns = int(max_turns)
        self.padded = padded
        self.on_overflow = on_overflow
        self.system_prompt = system_prompt
        self.shuffle = shuffle
        self._rng = torch.Generator().manual_seed(0)
        self._order: list[int] = []
        n = batch_size
        self._samples: list[Mapping[str, Any]] = [{} for _ in range(n)]
        self._prompts = [""] * n
        self._histories = [History() for _ in range(n)]
        self._turns = [0] * n
        self._texts = [""] * n
        self._ids: list[list[int]] = [[] for _ in range(n)]
        self._cut = [False] * n
        self._make_specs()

    # ----------------------------------------------------------------- specs
    def _make_specs(self) -> None:
        B = self.batch_size
        obs = {
            "text": NonTensor(shape=B, example_data="prompt"),
            "history": NonTensor(shape=B, example_data=History()),
            "prompt_truncated": Unbounded(shape=(*B, 1), dtype=torch.bool),
        }
        if self.codec is not None:
            width = self.max_length if self.padded else -1  # -1: ragged
            obs["tokens"] = Unbounded(shape=(*B, width), dtype=torch.long)
            obs["attention_mask"] = Unbounded(shape=(*B, width), dtype=torch.bool)
        self.observation_spec = Composite(obs, shape=B)
        if self.from_text:
            action = NonTensor(shape=B, example_data="response")
        else:
            action = Unbounded(shape=(*B, -1), dtype=torch.long)
        self.full_action_spec = Composite({self.action_key_name: action}, shape=B)
        self.reward_spec = Unbounded(shape=(*B, 1), dtype=torch.float32)
        self.full_done_spec = Composite(
            {
                key: Categorical(2, shape=(*B, 1), dtype=torch.bool)
                for key in ("done", "terminated", "truncated")
            },
            shape=B,
        )

    @property
    def action_key_name(self) -> str:
        """``"text_response"`` when ``from_text`` else ``"tokens_response"``."""
        return "text_response" if self.from_text else "tokens_response"

    # ----------------------------------------------------------------- reset
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        n = self.batch_size[0]
        mask = None if tensordict is None else tensordict.get("_reset", None)
        rows = list(range(n)) if mask is None else mask.reshape(n).nonzero().flatten().tolist()
        for i in rows:
            sample, prompt = self._draw()
            history = History()
            if self.system_prompt is not None:
                history = history.append("system", self.system_prompt)
            self._samples[i] = sample
            self._prompts[i] = prompt
            self._histories[i] = history.append("user", prompt)
            self._turns[i] = 0
        self._observe(rows, at_reset=True)
        out = self._observation_td()
        zeros = torch.zeros(n, 1, dtype=torch.bool)
        out.set("done", zeros)
        out.set("terminated", zeros.clone())
        out.set("truncated", zeros.clone())
        return out

    def _reset_proc_data(self, tensordict, tensordict_reset):
        # A partial reset: ``_reset`` already wrote every row (rows not reset carry their
        # state), and torchrl's masked merge cannot handle nested or non-tensor entries.
        reset = None if tensordict is None else tensordict.get("_reset", None)
        if reset is None or bool(reset.all()):
            return super()._reset_proc_data(tensordict, tensordict_reset)
        tensordict.del_("_reset")
        return tensordict.update(tensordict_reset)

    def _draw(self) -> tuple[Mapping[str, Any], str]:
        if not self._order:
            n = len(self.source)
            order = torch.randperm(n, generator=self._rng) if self.shuffle else torch.arange(n)
            self._order = order.tolist()[::-1]
        index = self._order.pop()
        item = self.source[index]
        if isinstance(item, str):
            sample: Mapping[str, Any] = {"prompt": item}
            prompt = item
        elif isinstance(item, Mapping) and isinstance(item.get("prompt"), str):
            sample, prompt = item, item["prompt"]
        else:
            raise TypeError(
                f"LLMEnv source item {index} must be a str or a mapping with a 'prompt' "
                f"string; got {type(item).__name__}"
                + (f" with keys {sorted(item)}" if isinstance(item, Mapping) else "")
            )
        if not prompt.strip():
            raise ValueError(
                f"LLMEnv source item {index} has an empty prompt; remove it from the dataset "
                "or give it text (an empty question has no answer to reward)"
            )
        return sample, prompt

    def _observe(self, rows: Sequence[int], at_reset: bool) -> None:
        """Render, tokenize and clip the prompts of ``rows`` into the per-element state."""
        if not rows:
            return
        tmpl = None if self.codec is None else self.codec.chat_template
        specials = None if self.codec is None else self.codec.special_tokens
        texts = [render_chat(self._histories[i], tmpl, special_tokens=specials) for i in rows]
        if self.codec is None:
            for i, text in zip(rows, texts):
                cut = len(text) > self.max_length
                if cut:
                    self._check_overflow(i, len(text), at_reset, "characters")
                    text = text[-self.max_length :]
                self._texts[i], self._cut[i] = text, cut
            return
        ids = self.codec.encode_batch(texts)
        cut_rows = []
        for i, text, seq in zip(rows, texts, ids):
            cut = len(seq) > self.max_length
            if cut:
                self._check_overflow(i, len(seq), at_reset, "tokens")
                seq = seq[-self.max_length :]
                cut_rows.append(i)
            self._texts[i], self._ids[i], self._cut[i] = text, seq, cut
        if cut_rows:
            decoded = self.codec.decode_batch([self._ids[i] for i in cut_rows])
            for i, text in zip(cut_rows, decoded):
                self._texts[i] = text

    def _check_overflow(self, i: int, length: int, at_reset: bool, unit: str) -> None:
        if at_reset and self.on_overflow == "error":
            raise ValueError(
                f"prompt of batch element {i} is {length} {unit}, over max_length="
                f"{self.max_length}; raise max_length, shorten the prompt, or pass "
                "on_overflow='truncate' to keep its last max_length tokens"
            )

    def _observation_td(self) -> TensorDictBase:
        n = self.batch_size[0]
        if self.codec is not None and not self.padded:
            lengths = [len(s) for s in self._ids]
            flat = torch.tensor([t for s in self._ids for t in s], dtype=torch.long)
            ones = torch.ones(flat.shape[0], dtype=torch.bool)
            out: TensorDictBase = lazy_stack(
                [
                    TensorDict({"tokens": t, "attention_mask": m})
                    for t, m in zip(flat.split(lengths), ones.split(lengths))
                ]
            )
        else:
            out = TensorDict(batch_size=self.batch_size)
            if self.codec is not None:
                tokens, mask = _left_pad(self._ids, self.codec.pad_token_id, self.max_length)
                out.set("tokens", tokens)
                out.set("attention_mask", mask)
        out.set("text", NonTensorStack(*self._texts, batch_size=[n]))
        out.set("history", NonTensorStack(*self._histories, batch_size=[n]))
        out.set("prompt_truncated", torch.tensor(self._cut, dtype=torch.bool).unsqueeze(-1))
        return out

    # ------------------------------------------------------------------ step
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        n = self.batch_size[0]
        texts, ids = self._read_action(tensordict)
        eos_hit = [False] * n
        if self.codec is not None:
            eos = self.codec.eos_token_id
            if ids is None:
                ids = self.codec.encode_batch(texts)
            for i, seq in enumerate(ids):
                if eos is not None and eos in seq:
                    ids[i] = seq[: seq.index(eos) + 1]
                    eos_hit[i] = True
            if texts is None:
                texts = self.codec.decode_batch(ids, skip_special_tokens=False)
            if self.codec.eos_token:
                texts = [t.split(self.codec.eos_token, 1)[0] for t in texts]
        rewards = torch.zeros(n, 1)
        for i in range(n):
            self._histories[i] = self._histories[i].append("assistant", texts[i])
            self._turns[i] += 1
            if self.reward_fn is not None:
                rewards[i, 0] = self._score(i, texts[i])
        self._observe(range(n), at_reset=False)
        terminated = torch.tensor(
            [e or t >= self.max_turns for e, t in zip(eos_hit, self._turns)], dtype=torch.bool
        ).unsqueeze(-1)
        truncated = torch.tensor(self._cut, dtype=torch.bool).unsqueeze(-1)
        out = self._observation_td()
        out.set("reward", rewards)
        out.set("terminated", terminated)
        out.set("truncated", truncated)
        out.set("done", terminated | truncated)
        return out

    def _score(self, i: int, response: str) -> float:
        value = self.reward_fn(self._prompts[i], response, self._samples[i])
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise TypeError(
                f"reward_fn must return a float, got {type(value).__name__} ({value!r}) for "
                f"batch element {i}; return float(score)"
            )
        if math.isnan(value):
            raise ValueError(f"reward_fn returned NaN for batch element {i} ({response!r})")
        return float(value)

    def _read_action(self, td: TensorDictBase) -> tuple[list[str] | None, list[list[int]] | None]:
        n = self.batch_size[0]
        text = td.get("text_response", None)
        if isinstance(td, LazyStackedTensorDict) and "tokens_response" in td:
            tokens = td.get("tokens_response", as_list=True)
        else:
            tokens = td.get("tokens_response", None)
        if text is None and tokens is None:
            raise KeyError(
                f"LLMEnv.step expects the action under {self.action_key_name!r}"
                + (" or 'tokens_response'" if self.from_text and self.codec else "")
                + (" or 'text_response'" if not self.from_text else "")
                + f"; the tensordict has keys {sorted(map(str, td.keys()))}"
            )
        texts = None if text is None else _as_strings(text, n)
        ids = None
        if tokens is not None:
            if self.codec is None:
                raise ValueError(
                    "this LLMEnv has no tokenizer, so it cannot read 'tokens_response'; "
                    "pass 'text_response' strings or build the env with a tokenizer"
                )
            pad = self.codec.pad_token_id
            if pad == self.codec.eos_token_id:
                pad = None  # trailing EOS padding is cut at the first EOS instead
            ids = _as_id_lists(tokens, n, td.get("response_mask", None), pad)
        elif not self.from_text and texts is not None and self.codec is None:
            raise ValueError("from_text=False needs tokens_response")
        return texts, ids

    def _set_seed(self, seed: int | None) -> None:
        self._rng.manual_seed(0 if seed is None else int(seed))
        self._order = []


def _as_strings(value: Any, n: int) -> list[str]:
    if isinstance(value, NonTensorData):
        value = value.data
    if isinstance(value, NonTensorStack):
        value = value.tolist()
    if isinstance(value, str):  # one non-tensor value stands for the whole batch
        value = [value] * n
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        kind = type(value).__name__
        if isinstance(value, list):
            kind = f"list with {sorted({type(v).__name__ for v in value})}"
        raise TypeError(
            f"text_response must be {n} strings (a list or NonTensorStack), got {kind}; "
            "decode token ids first, or put them under 'tokens_response'"
        )
    if len(value) != n:
        raise ValueError(
            f"text_response has {len(value)} strings but the env batch size is {n}; "
            "give one response per batch element"
        )
    return value


def _as_id_lists(value: Any, n: int, mask: Any, pad_id: int | None) -> list[list[int]]:
    if isinstance(value, NonTensorData):
        value = value.data
    if isinstance(value, NonTensorStack):
        value = value.tolist()
    if isinstance(value, torch.Tensor) and value.is_nested:
        rows = list(value.unbind(0))
    elif isinstance(value, torch.Tensor) and value.ndim == 2:
        if value.is_floating_point():
            raise TypeError(f"tokens_response must hold integer ids, got dtype {value.dtype}")
        if isinstance(mask, torch.Tensor) and mask.is_nested:
            mask = None
        if mask is not None:
            rows = [r[m.bool()] for r, m in zip(value, mask)]
        else:
            rows = [_strip_right(r, pad_id) for r in value]
    elif isinstance(value, list | tuple) and all(isinstance(v, torch.Tensor) for v in value):
        rows = list(value)
    else:
        raise TypeError(
            "tokens_response must be a nested tensor, a list of 1-D id tensors or a [B, T] "
            f"id tensor; got {type(value).__name__}"
            + (f" of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else "")
        )
    if len(rows) != n:
        raise ValueError(
            f"tokens_response has {len(rows)} sequences but the env batch size is {n}; "
            "give one response per batch element"
        )
    out = []
    for r in rows:
        if r.is_floating_point() or r.ndim != 1:
            raise TypeError(
                f"each tokens_response row must be a 1-D integer tensor, got {r.dtype} "
                f"of shape {tuple(r.shape)}"
            )
        out.append(r.tolist())
    return out


def _left_pad(
    seqs: Sequence[Sequence[int]], pad_id: int, width: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, width]`` ids left-padded with ``pad_id`` and the boolean mask of real tokens."""
    # numpy: single-threaded small fills, no intra-op thread wake-ups per call
    ids = np.full((len(seqs), width), pad_id, dtype=np.int64)
    lengths = np.fromiter((len(x) for x in seqs), dtype=np.int64, count=len(seqs))
    for row, seq in enumerate(seqs):
        if len(seq):
            ids[row, width - len(seq) :] = seq
    mask = np.arange(width)[None, :] >= (width - lengths)[:, None]
    return torch.from_numpy(ids), torch.from_numpy(mask)


def _strip_right(row: torch.Tensor, pad_id: int | None) -> torch.Tensor:
    if pad_id is None:
        return row
    keep = (row != pad_id).nonzero()
    return row[: int(keep[-1]) + 1] if keep.numel() else row[:0]
