"""``LLMEnv``: prompts on reset, generated text or tokens as actions, rewards from a function."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
from torchrl.data.tensor_specs import StackedComposite
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

    Specs: ``check_env_specs`` passes in every layout. The action spec of
    ``from_text=False`` is bounded to the tokenizer's vocabulary, so random actions
    (``rand_step``, ``rollout`` without a policy) are ids it can decode. A ragged
    batched env describes its observation per element (a ``StackedComposite``, like
    its data), since each element has its own length.

    Args:
        source: the prompts: a sequence of strings, a dataset (a sequence of mappings
            with a ``"prompt"`` string, e.g. :class:`ArithmeticDataset`; the whole
            sample is passed to ``reward_fn``), or an iterable such as a
            ``torch.utils.data.DataLoader``: its batches (lists of prompts or
            collated dicts of lists) are unpacked into samples, read in the loader's
            order, and a re-iterable loader restarts when it runs out.
        tokenizer: a ``tokenizers.Tokenizer`` or a ``transformers`` fast tokenizer, or
            ``None`` for a text-only environment.
        from_text: the action is ``text_response`` (True) or ``tokens_response``
            (False, needs a tokenizer).
        batch_size: number of episodes run side by side; ``()`` makes an unbatched
            env (one episode, no batch dimension: ``td["text"]`` is a string).
        max_length: the prompt budget in tokens (characters without a tokenizer).
        reward_fn: ``reward_fn(prompt, response, sample) -> float``; ``None`` rewards 0.
        max_turns: responses per episode.
        eos_token_id: the id that ends a response (default: the tokenizer's EOS).
        padded: padded tensors with masks instead of ragged nested tensors.
        on_overflow: ``"truncate"`` or ``"error"`` for prompts over ``max_length``.
        system_prompt: a system message put before every prompt.
        shuffle: draw samples of a sequence in a random order (reseeded by
            ``set_seed``) rather than in order; an iterable keeps its own order.
        repeats: draw each sample this many times in a row, for group baselines
            (GRPO): with ``batch_size`` a multiple of ``repeats``, a full reset gives
            each group of ``repeats`` consecutive elements the same prompt.

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
        >>> group = LLMEnv(["Say hi.", "Count to 3."], batch_size=4, repeats=2, shuffle=False)
        >>> [h.messages[-1].content for h in group.reset()["history"]]
        ['Say hi.', 'Say hi.', 'Count to 3.', 'Count to 3.']
        >>> LLMEnv(["Say hi."], batch_size=()).reset()["text"]
        '<|user|>Say hi.\\n<|assistant|>'
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
        repeats: int = 1,
    ) -> None:
        indexable = isinstance(source, Sequence) or (
            hasattr(source, "__len__") and hasattr(source, "__getitem__")
        )
        if isinstance(source, str | bytes | Mapping) or not (
            indexable or isinstance(source, Iterable)
        ):
            raise TypeError(
                "LLMEnv needs prompt strings or samples with a 'prompt' key, as a sequence, "
                f"a dataset or an iterable (e.g. a DataLoader); got {type(source).__name__}. "
                "Wrap a single prompt in a list."
            )
        if indexable and len(source) == 0:
            raise ValueError("LLMEnv got an empty source; pass at least one prompt")
        unbatched = False
        if isinstance(batch_size, torch.Size | tuple | list):
            if len(batch_size) > 1:
                raise ValueError(
                    f"LLMEnv batch_size must be one number or () for an unbatched env, "
                    f"got {tuple(batch_size)}"
                )
            unbatched = len(batch_size) == 0
            batch_size = 1 if unbatched else int(batch_size[0])
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"LLMEnv batch_size must be an int >= 1 or (), got {batch_size!r}")
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise ValueError(f"LLMEnv repeats must be an int >= 1, got {repeats!r}")
        if batch_size % repeats:
            raise ValueError(
                f"LLMEnv batch_size ({batch_size}) must be a multiple of repeats ({repeats}) so "
                "that every group of repeats fits in one batch; change one of them"
            )
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
        super().__init__(batch_size=torch.Size([] if unbatched else [batch_size]))
        self.source = source
        self.repeats = repeats
        self._indexable = indexable
        self._iterator: Iterator[Any] | None = None
        self._yielded = False
        self._pending: list[tuple[str, Any]] = []  # unpacked samples of a source batch
        self._repeat_left = 0
        self._repeat_of: tuple[Mapping[str, Any], str] | None = None
        self._n = batch_size  # batch elements, 1 for an unbatched env
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
        self.observation_spec = self._observation_spec()
        if self.from_text:
            action = NonTensor(shape=B, example_data="response")
        else:
            # bounded to the vocabulary: random actions (rand_step, a rollout without a
            # policy, check_env_specs) are ids the tokenizer can decode
            action = Categorical(self.codec.vocab_size, shape=(*B, -1), dtype=torch.long)
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
    def _ragged(self) -> bool:
        return self.codec is not None and not self.padded

    def _observation_spec(self) -> Composite:
        def spec(shape: tuple[int, ...]) -> Composite:
            obs = {
                "text": NonTensor(shape=shape, example_data="prompt"),
                "history": NonTensor(shape=shape, example_data=History()),
                "prompt_truncated": Unbounded(shape=(*shape, 1), dtype=torch.bool),
            }
            if self.codec is not None:
                width = self.max_length if self.padded else -1  # -1: ragged
                obs["tokens"] = Unbounded(shape=(*shape, width), dtype=torch.long)
                obs["attention_mask"] = Unbounded(shape=(*shape, width), dtype=torch.bool)
            return Composite(obs, shape=shape)

        if self._ragged and self.batch_size:
            # one spec per element, stacked like the data: each element has its own length
            return StackedComposite(*(spec(()) for _ in range(self._n)), dim=0)
        return spec(tuple(self.batch_size))

    def fake_tensordict(self) -> TensorDictBase:
        """A zero-filled tensordict shaped like a step's input and output.

        A ragged batched env returns it as a lazy stack of per-element tensordicts, the
        layout of its real data, so torchrl's ``check_env_specs`` compares like with like.
        """
        fake = super().fake_tensordict()
        if self._ragged and self.batch_size:
            return lazy_stack(list(fake.unbind(0)), 0)
        return fake

    @property
    def action_key_name(self) -> str:
        """``"text_response"`` when ``from_text`` else ``"tokens_response"``."""
        return "text_response" if self.from_text else "tokens_response"

    # ----------------------------------------------------------------- reset
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        n = self._n
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
        return self._unbatch(out)

    def _unbatch(self, out: TensorDictBase) -> TensorDictBase:
        """The one element of an unbatched env (``batch_size=()``) without its batch dim."""
        return out if self.batch_size else out[0]

    def _reset_proc_data(self, tensordict, tensordict_reset):
        # A partial reset: ``_reset`` already wrote every row (rows not reset carry their
        # state), and torchrl's masked merge cannot handle nested or non-tensor entries.
        reset = None if tensordict is None else tensordict.get("_reset", None)
        if reset is None or bool(reset.all()):
            return super()._reset_proc_data(tensordict, tensordict_reset)
        tensordict.del_("_reset")
        return tensordict.update(tensordict_reset)

    def _draw(self) -> tuple[Mapping[str, Any], str]:
        """The next sample and its prompt; each is drawn ``repeats`` times in a row."""
        if self._repeat_left == 0:
            self._repeat_of = self._next_sample()
            self._repeat_left = self.repeats
        self._repeat_left -= 1
        return self._repeat_of

    def _next_sample(self) -> tuple[Mapping[str, Any], str]:
        if self._indexable:
            if not self._order:
                n = len(self.source)
                order = torch.randperm(n, generator=self._rng) if self.shuffle else torch.arange(n)
                self._order = order.tolist()[::-1]
            index = self._order.pop()
            return _as_sample(self.source[index], f"item {index}")
        if not self._pending:
            self._pending = self._next_batch()
        label, item = self._pending.pop()
        return _as_sample(item, label)

    def _next_batch(self) -> list[tuple[str, Any]]:
        """The next item of an iterable source, unpacked into samples (a DataLoader
        yields batches: a list of prompts or a dict of lists); restarts it when done."""
        restarted = False
        while True:
            if self._iterator is None:
                self._iterator = iter(self.source)
            try:
                item = next(self._iterator)
            except StopIteration:
                self._iterator = None
                if not self._yielded:
                    raise ValueError(
                        "LLMEnv's iterable source yielded no prompts; give it at least one"
                    ) from None
                if restarted or iter(self.source) is self.source:
                    raise ValueError(
                        "LLMEnv's iterable source ran out of prompts and cannot be restarted "
                        f"(a one-shot {type(self.source).__name__}); pass a re-iterable "
                        "source such as a DataLoader or a list"
                    ) from None
                restarted = True  # a re-iterable source (a DataLoader): its next epoch
                continue
            samples = _unpack_batch(item)
            if samples:
                self._yielded = True
                return [(f"item {i} of a source batch", x) for i, x in enumerate(samples)][::-1]

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
        n = self._n
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
            out = TensorDict(batch_size=[n])
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
        n = self._n
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
        return self._unbatch(out)

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
        n = self._n
        text = td.get("text_response", None)
        if isinstance(td, LazyStackedTensorDict) and "tokens_response" in td:
            tokens = td.get("tokens_response", as_list=True)
        else:
            tokens = td.get("tokens_response", None)
        mask = td.get("response_mask", None)
        if not self.batch_size and isinstance(tokens, torch.Tensor) and tokens.ndim == 1:
            tokens = tokens.unsqueeze(0)  # an unbatched env's one response
            mask = None if mask is None else mask.reshape(1, -1)
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
            ids = _as_id_lists(tokens, n, mask, pad)
        elif not self.from_text and texts is not None and self.codec is None:
            raise ValueError("from_text=False needs tokens_response")
        return texts, ids

    def _set_seed(self, seed: int | None) -> None:
        self._rng.manual_seed(0 if seed is None else int(seed))
        self._order = []
        self._repeat_left = 0  # a reseeded env starts a new group


def _as_sample(item: Any, label: str) -> tuple[Mapping[str, Any], str]:
    if isinstance(item, str):
        sample: Mapping[str, Any] = {"prompt": item}
        prompt = item
    elif isinstance(item, Mapping) and isinstance(item.get("prompt"), str):
        sample, prompt = item, item["prompt"]
    else:
        raise TypeError(
            f"LLMEnv source {label} must be a str or a mapping with a 'prompt' "
            f"string; got {type(item).__name__}"
            + (f" with keys {sorted(item)}" if isinstance(item, Mapping) else "")
        )
    if not prompt.strip():
        raise ValueError(
            f"LLMEnv source {label} has an empty prompt; remove it from the dataset "
            "or give it text (an empty question has no answer to reward)"
        )
    return sample, prompt


def _unpack_batch(item: Any) -> list[Any]:
    """The samples in one item of an iterable source: a prompt, a sample, a list of
    them, or a collated dict of lists (what ``torch.utils.data.DataLoader`` yields)."""
    if isinstance(item, Mapping) and isinstance(item.get("prompt"), list | tuple):
        n = len(item["prompt"])
        return [
            {
                k: (v[i] if isinstance(v, list | tuple | torch.Tensor) and len(v) == n else v)
                for k, v in item.items()
            }
            for i in range(n)
        ]
    if isinstance(item, list | tuple):
        return list(item)
    return [item]


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
