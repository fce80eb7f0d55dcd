"""``TransformersPolicy``: a ``transformers`` causal LM as the policy of an :class:`LLMEnv`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, NonTensorStack, TensorDictBase
from tensordict.nn import TensorDictModuleBase

from rlpace.envs.llm._tokenizer import TextCodec

__all__ = ["TransformersPolicy"]

_DEFAULT_GENERATE = {"do_sample": True, "max_new_tokens": 16, "top_k": 0, "top_p": 1.0}


class TransformersPolicy(TensorDictModuleBase):
    """Generate responses with a ``transformers`` causal LM, with per-token log-probs.

    Reads ``tokens`` (the prompt ids) and ``attention_mask`` from the tensordict, in
    either layout :class:`LLMEnv` produces (ragged lazy stack, or left-padded
    ``[B, L]``), and writes:

    - ``tokens_response``: the generated ids, up to and including the first EOS;
    - ``text_response``: their text, without the EOS;
    - ``log_probs`` (when ``return_log_probs``): ``log p(token | prefix)`` of each
      response token, aligned with ``tokens_response``.

    Ragged input gives ragged output (one tensor per element); padded input gives
    ``[B, max_new_tokens]`` outputs right-padded with the pad id, plus
    ``response_mask``; the log-probs of padding positions are exactly 0. The log-probs are the model's
    softmax over the allowed tokens, which is the sampling distribution for plain
    sampling (the default here: ``top_k=0``, ``top_p=1``, temperature 1).

    Generation runs under ``torch.no_grad()``; :meth:`log_prob` recomputes the same
    log-probs with gradients for a policy-gradient loss. Put the model in ``eval()``
    mode (no dropout) so the two agree; a model freshly built from a config is in
    training mode.

    Args:
        model: a ``transformers`` causal LM *object* (never a name: rlpace does not
            download weights).
        tokenizer: the tokenizer the env uses (``tokenizers.Tokenizer`` or a fast
            ``transformers`` tokenizer); it needs pad and EOS tokens.
        generate_kwargs: passed to ``model.generate`` over the defaults
            ``do_sample=True, max_new_tokens=16, top_k=0, top_p=1.0``.
        return_log_probs: also write ``log_probs``.
        allowed_token_ids: restrict generation (and the log-probs) to these ids,
            e.g. digits and EOS for a numeric answer; ``None`` allows all.

    Example:
        >>> import torch
        >>> from transformers import GPT2Config, GPT2LMHeadModel
        >>> from rlpace.envs.llm import LLMEnv, TransformersPolicy, default_tokenizer
        >>> tok = default_tokenizer()
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=512,
        ...                                    bos_token_id=1, eos_token_id=1)).eval()
        >>> policy = TransformersPolicy(model, tok, {"max_new_tokens": 4})
        >>> env = LLMEnv(["What is 1 + 1?", "Say hi."], tokenizer=tok, batch_size=2)
        >>> td = policy(env.reset())
        >>> [t.shape == lp.shape for t, lp in zip(td.get("tokens_response", as_list=True),
        ...                                       td.get("log_probs", as_list=True))]
        [True, True]
        >>> bool((td.get("log_probs", as_list=True)[0] <= 0).all())
        True
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        generate_kwargs: Mapping[str, Any] | None = None,
        return_log_probs: bool = True,
        allowed_token_ids: Sequence[int] | None = None,
    ) -> None:
        if isinstance(model, (str, Path)):
            raise TypeError(
                f"TransformersPolicy got the name {str(model)!r} where a model object was "
                "expected; rlpace never downloads weights. Build the model yourself, e.g. "
                "GPT2LMHeadModel(GPT2Config(...)), or load it from a local directory with "
                "AutoModelForCausalLM.from_pretrained(path, local_files_only=True)."
            )
        if not hasattr(model, "generate"):
            raise TypeError(
                f"TransformersPolicy needs a transformers causal LM with .generate(), got "
                f"{type(model).__name__}"
            )
        codec = TextCodec(tokenizer)
        missing = [
            name
            for name, value in (("pad", codec.pad_token_id), ("EOS", codec.eos_token_id))
            if value is None
        ]
        if missing:
            raise ValueError(
                f"TransformersPolicy needs {' and '.join(missing)} token(s) to batch and stop "
                "generation, and the tokenizer has none; add them (for a transformers "
                "tokenizer: tok.pad_token = tok.eos_token) or use default_tokenizer()"
            )
        model_vocab = getattr(getattr(model, "config", None), "vocab_size", None)
        if model_vocab is not None and model_vocab < codec.vocab_size:
            raise ValueError(
                f"the model's vocab_size is {model_vocab} but the tokenizer has "
                f"{codec.vocab_size} tokens; build the model with "
                f"vocab_size={codec.vocab_size}"
            )
        super().__init__()
        self.model = model
        self.codec = codec
        self.generate_kwargs = {**_DEFAULT_GENERATE, **dict(generate_kwargs or {})}
        self.return_log_probs = return_log_probs
        self.in_keys = ["tokens", "attention_mask"]
        self.out_keys = ["tokens_response", "text_response"] + (
            ["log_probs"] if return_log_probs else []
        )
        if allowed_token_ids is not None:
            allowed = torch.as_tensor(list(allowed_token_ids), dtype=torch.long)
            if allowed.numel() == 0:
                raise ValueError("allowed_token_ids is empty; pass None to allow every token")
            if codec.eos_token_id not in allowed.tolist():
                allowed = torch.cat([allowed, torch.tensor([codec.eos_token_id])])
            self.allowed_token_ids: torch.Tensor | None = allowed
        else:
            self.allowed_token_ids = None

    @property
    def device(self) -> torch.device:
        """The device of the model's parameters."""
        return next(self.model.parameters()).device

    # --------------------------------------------------------------- generation
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        prompts = _prompt_ids(tensordict)
        ids, mask = _left_pad(prompts, self.codec.pad_token_id, self.device)
        kwargs = dict(self.generate_kwargs)
        if self.allowed_token_ids is not None:
            from transformers import LogitsProcessorList

            kwargs["logits_processor"] = LogitsProcessorList([self._mask_logits])
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask.long(),
                pad_token_id=self.codec.pad_token_id,
                eos_token_id=self.codec.eos_token_id,
                return_dict_in_generate=True,
                output_logits=self.return_log_probs,
                **kwargs,
            )
        response = out.sequences[:, ids.shape[1] :]
        logits_steps = list(out.logits) if self.return_log_probs else []
        target = kwargs.get("max_new_tokens")
        if isinstance(target, int) and response.shape[1] < target:
            # generation stopped early for every row: pad to the fixed response width
            extra = target - response.shape[1]
            fill = response.new_full((response.shape[0], extra), self.codec.pad_token_id)
            response = torch.cat([response, fill], dim=1)
            if logits_steps:
                logits_steps += [torch.zeros_like(logits_steps[0])] * extra
        is_eos = response == self.codec.eos_token_id
        width = response.shape[1]
        first_eos = torch.where(is_eos.any(1), is_eos.float().argmax(1), width)
        lengths = torch.clamp(first_eos + 1, max=width)
        resp_mask = torch.arange(width, device=response.device) < lengths.unsqueeze(1)
        response = response.masked_fill(~resp_mask, self.codec.pad_token_id)
        log_probs = None
        if self.return_log_probs:
            logits = torch.stack(logits_steps, dim=1).float()
            log_probs = self._gather_log_probs(logits, response, resp_mask)
        lengths_list = lengths.tolist()
        rows = [r[:n].cpu() for r, n in zip(response, lengths_list)]
        texts = self.codec.decode_batch(
            [
                r[: n - 1] if r[n - 1] == self.codec.eos_token_id else r
                for r, n in zip(rows, lengths_list)
            ]
            if width
            else [[] for _ in rows]
        )
        self._write(tensordict, response, resp_mask, rows, texts, log_probs)
        return tensordict

    def _mask_logits(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        keep = torch.full_like(scores, float("-inf"))
        idx = self.allowed_token_ids.to(scores.device)
        keep[:, idx] = 0.0
        return scores + keep

    def _gather_log_probs(
        self, logits: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        if self.allowed_token_ids is not None:
            logits = self._mask_logits(tokens, logits.flatten(0, 1)).view_as(logits)
        lp = torch.log_softmax(logits, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        return torch.where(mask, lp, torch.zeros_like(lp))

    def _write(self, td, response, resp_mask, rows, texts, log_probs) -> None:
        if isinstance(td, LazyStackedTensorDict):
            lp_rows = None if log_probs is None else log_probs.cpu()
            for i, (sub, row) in enumerate(zip(td.tensordicts, rows)):
                sub.set("tokens_response", row)
                if lp_rows is not None:
                    sub.set("log_probs", lp_rows[i, : row.shape[0]])
        else:
            td.set("tokens_response", response.cpu())
            td.set("response_mask", resp_mask.cpu())
            if log_probs is not None:
                td.set("log_probs", log_probs.cpu())
        td.set("text_response", NonTensorStack(*texts, batch_size=td.batch_size))

    # ---------------------------------------------------------------- training
    def log_prob(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs of the stored responses under the current weights, with gradients.

        Returns:
            ``(log_probs, mask)``, both ``[B, T]`` right-padded and aligned with the
            response tokens; ``log_probs`` is exactly 0 where ``mask`` is False.

        Example:
            >>> import torch
            >>> from transformers import GPT2Config, GPT2LMHeadModel
            >>> from rlpace.envs.llm import LLMEnv, TransformersPolicy, default_tokenizer
            >>> tok = default_tokenizer()
            >>> model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=512,
            ...                                    bos_token_id=1, eos_token_id=1)).eval()
            >>> policy = TransformersPolicy(model, tok, {"max_new_tokens": 3})
            >>> td = policy(LLMEnv(["Hi", "Hello there"], tokenizer=tok, batch_size=2).reset())
            >>> lp, mask = policy.log_prob(td)
            >>> lp.requires_grad, lp.shape == mask.shape
            (True, True)
            >>> stored = torch.nn.utils.rnn.pad_sequence(td.get("log_probs", as_list=True),
            ...                                          batch_first=True)
            >>> torch.allclose(lp.detach(), stored, atol=1e-4)
            True
        """
        prompts = _prompt_ids(tensordict)
        responses = _response_ids(tensordict)
        if len(prompts) != len(responses):
            raise ValueError(
                f"log_prob got {len(prompts)} prompts but {len(responses)} responses; "
                "pass the tensordict the policy filled in"
            )
        device = self.device
        full = [torch.cat([p, r]) for p, r in zip(prompts, responses)]
        ids, mask = _left_pad(full, self.codec.pad_token_id, device)
        positions = (mask.long().cumsum(1) - 1).clamp(min=0)
        logits = self.model(
            input_ids=ids, attention_mask=mask.long(), position_ids=positions
        ).logits
        B, W = ids.shape
        lengths = torch.tensor([r.shape[0] for r in responses], device=device)
        T = int(lengths.max()) if B else 0
        j = torch.arange(T, device=device)
        resp_mask = j.unsqueeze(0) < lengths.unsqueeze(1)
        cols = (W - lengths).unsqueeze(1) + j.unsqueeze(0)  # column of response token j
        cols = torch.where(resp_mask, cols, torch.full_like(cols, W - 1))
        rows = torch.arange(B, device=device).unsqueeze(1).expand(B, T)
        tokens = ids[rows, cols]
        pred = logits[rows, cols - 1].float()  # logits at the previous position predict it
        return self._gather_log_probs(pred, tokens, resp_mask), resp_mask


def _prompt_ids(td: TensorDictBase) -> list[torch.Tensor]:
    if "tokens" not in td:
        raise KeyError(
            "TransformersPolicy reads prompt ids from 'tokens'; build the LLMEnv with a "
            f"tokenizer. The tensordict has keys {sorted(map(str, td.keys()))}"
        )
    if isinstance(td, LazyStackedTensorDict):
        return [t.reshape(-1) for t in td.get("tokens", as_list=True)]
    tokens = td.get("tokens")
    mask = td.get("attention_mask", None)
    if mask is None:
        return list(tokens)
    return [t[m.bool()] for t, m in zip(tokens, mask)]


def _response_ids(td: TensorDictBase) -> list[torch.Tensor]:
    if "tokens_response" not in td:
        raise KeyError("log_prob needs 'tokens_response'; call the policy on the tensordict first")
    if isinstance(td, LazyStackedTensorDict):
        return list(td.get("tokens_response", as_list=True))
    tokens = td.get("tokens_response")
    mask = td.get("response_mask", None)
    if mask is None:
        raise KeyError("padded responses need 'response_mask' to know their lengths")
    return [t[m.bool()] for t, m in zip(tokens, mask)]


def _left_pad(
    seqs: Sequence[torch.Tensor], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    width = max((s.shape[0] for s in seqs), default=0)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(seqs), width), dtype=torch.bool, device=device)
    for i, s in enumerate(seqs):
        if s.shape[0]:
            ids[i, width - s.shape[0] :] = s.to(device)
            mask[i, width - s.shape[0] :] = True
    return ids, mask
