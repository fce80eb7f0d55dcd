"""A language-model text environment: prompts on reset, generated text or tokens as actions.

``LLMEnv`` is a torchrl ``EnvBase``: prompts come from a dataset (or a list of
strings) on reset, the policy's generated text or tokens are the action, and a reward
function scores them. ``TransformersPolicy`` wraps a ``transformers`` causal LM as the
policy. Nothing is ever downloaded: :func:`default_tokenizer` ships with the package.

``LLMEnv`` and ``TransformersPolicy`` load on first access: importing torchrl sets
the process-wide multiprocessing start method, which a plain ``import
rlpace.envs.llm`` must not do.

Example:
    >>> from rlpace.envs.llm import LLMEnv, default_tokenizer
    >>> env = LLMEnv(["Say hi."], tokenizer=default_tokenizer(), batch_size=1)
    >>> env.reset()["text"][0]
    '<|user|>Say hi.\\n<|assistant|>'
"""

from importlib import import_module

from rlpace.envs.llm._datasets import ArithmeticDataset
from rlpace.envs.llm._history import DEFAULT_CHAT_TEMPLATE, History, Message, render_chat
from rlpace.envs.llm._rewards import ExactMatchReward, FormatReward, extract_final_answer
from rlpace.envs.llm._tokenizer import (
    TextCodec,
    as_transformers_tokenizer,
    default_tokenizer,
    load_tokenizer,
)

_LAZY = {
    "LLMEnv": "rlpace.envs.llm._env",
    "TransformersPolicy": "rlpace.envs.llm._policy",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlpace.envs.llm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "DEFAULT_CHAT_TEMPLATE",
    "ArithmeticDataset",
    "ExactMatchReward",
    "FormatReward",
    "History",
    "LLMEnv",
    "Message",
    "TextCodec",
    "TransformersPolicy",
    "as_transformers_tokenizer",
    "default_tokenizer",
    "extract_final_answer",
    "load_tokenizer",
    "render_chat",
]
