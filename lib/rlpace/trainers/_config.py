"""Structured configs: frozen dataclasses, checked when built, registered with Hydra.

``PPOConfig`` and ``SACConfig`` are whole-run configs: usable from Python directly
(``PPOTrainer.from_config(PPOConfig(...))``) or composed from the YAML presets under
``rlpace/trainers/conf`` with Hydra overrides (:func:`load_config`). Every path fails
before any work starts, with a message naming the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CONF_DIR",
    "ConfigError",
    "EnvConfig",
    "PPOConfig",
    "RunConfig",
    "SACConfig",
    "TrainerConfig",
    "config_from_dict",
    "config_keys",
    "config_to_dict",
    "load_config",
    "register_configs",
]

CONF_DIR = Path(__file__).resolve().parent / "conf"


class ConfigError(ValueError):
    """A config value that cannot run: names the key, what arrived and the fix.

    Example:
        >>> raise ConfigError("ppo.lr", "a positive float", -1.0, "set lr=3e-4")
        Traceback (most recent call last):
        ...
        rlpace.trainers._config.ConfigError: ppo.lr: expected a positive float, got -1.0; set lr=3e-4
    """

    def __init__(self, key: str, expected: str, got: Any, fix: str) -> None:
        self.key = key
        super().__init__(f"{key}: expected {expected}, got {got!r}; {fix}")


def _check(ok: bool, key: str, expected: str, got: Any, fix: str) -> None:
    if not ok:
        raise ConfigError(key, expected, got, fix)


def _positive_int(obj: Any, prefix: str, name: str, *, zero_ok: bool = False) -> None:
    value = getattr(obj, name)
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= (0 if zero_ok else 1)
    what = "an int >= 0" if zero_ok else "a positive int"
    _check(ok, f"{prefix}{name}", what, value, f"set {prefix}{name} to {what}")


def _positive_float(obj: Any, prefix: str, name: str) -> None:
    value = getattr(obj, name)
    ok = isinstance(value, int | float) and math.isfinite(value) and value > 0
    _check(ok, f"{prefix}{name}", "a positive finite float", value, f"set {prefix}{name} > 0")


def _unit_float(obj: Any, prefix: str, name: str, *, closed: bool = True) -> None:
    value = getattr(obj, name)
    upper_ok = value <= 1 if closed else value < 1
    ok = isinstance(value, int | float) and value >= 0 and upper_ok
    rng = "[0, 1]" if closed else "[0, 1)"
    _check(ok, f"{prefix}{name}", f"a float in {rng}", value, f"set {prefix}{name} in {rng}")


def _hidden_sizes(obj: Any, prefix: str) -> None:
    sizes = tuple(obj.hidden_sizes)
    object.__setattr__(obj, "hidden_sizes", sizes)
    ok = len(sizes) >= 1 and all(isinstance(s, int) and s > 0 for s in sizes)
    _check(ok, f"{prefix}hidden_sizes", "one or more positive ints", sizes, "e.g. [64, 64]")


@dataclass(frozen=True)
class EnvConfig:
    """Which environment to train on.

    Example:
        >>> EnvConfig(name="CartPole-v1").name
        'CartPole-v1'
    """

    name: str = "???"
    """Gymnasium id, e.g. ``CartPole-v1`` (built through ``torchrl.envs.GymEnv``)."""
    num_envs: int = 1
    """Env copies stepped together in one process (gymnasium's sync vector env)."""

    def __post_init__(self) -> None:
        ok = isinstance(self.name, str) and self.name not in ("", "???")
        _check(ok, "env.name", "a gymnasium id", self.name, "pass env=CartPole-v1")
        _positive_int(self, "env.", "num_envs")


@dataclass(frozen=True)
class TrainerConfig:
    """The loop's budget and cadence, shared by every algorithm.

    Example:
        >>> TrainerConfig(total_frames=2000, frames_per_batch=500).num_batches
        4
    """

    total_frames: int = 100_000
    """Frames to collect in the whole run (rounded up to whole batches)."""
    frames_per_batch: int = 1000
    """Frames per collected batch; one batch is followed by its optimisation steps."""
    eval_every_batches: int = 0
    """Run a deterministic evaluation every this many batches; 0 never evaluates."""
    eval_episodes: int = 3
    """Episodes per evaluation."""
    checkpoint_every_batches: int = 0
    """Write ``checkpoints/batch_{n}.pt`` every this many batches; 0 only at the end."""
    log_every_batches: int = 1
    """Write one log row every this many batches."""
    run_dir: str | None = None
    """Where logs, config, checkpoints and the plot go; None makes ``runs/{algo}-{env}-s{seed}-{time}``."""
    progress: bool = True
    """Show a progress bar (only when stderr is a terminal)."""
    tensorboard: bool = False
    """Also log to TensorBoard when ``torch.utils.tensorboard`` can be imported."""
    plot: bool = True
    """Write ``learning_curve.png`` (return vs frames) at the end of the run."""
    target_return: float | None = None
    """Stop early once the mean return of the last 10 episodes reaches this."""
    num_threads: int = 1
    """torch intra-op threads during the run (restored after); small MLPs are fastest on 1."""

    def __post_init__(self) -> None:
        p = "trainer."
        _positive_int(self, p, "total_frames")
        _positive_int(self, p, "frames_per_batch")
        _positive_int(self, p, "eval_every_batches", zero_ok=True)
        _positive_int(self, p, "eval_episodes")
        _positive_int(self, p, "checkpoint_every_batches", zero_ok=True)
        _positive_int(self, p, "log_every_batches")
        _positive_int(self, p, "num_threads")
        _check(
            self.frames_per_batch <= self.total_frames,
            "trainer.frames_per_batch",
            f"at most trainer.total_frames ({self.total_frames})",
            self.frames_per_batch,
            "lower trainer.frames_per_batch or raise trainer.total_frames",
        )

    @property
    def num_batches(self) -> int:
        """How many batches the run collects."""
        return -(-self.total_frames // self.frames_per_batch)


@dataclass(frozen=True)
class RunConfig:
    """What every algorithm's run config has: env, loop, seed, network, optimiser, discount.

    :class:`PPOConfig` and :class:`SACConfig` extend it with their own fields and set
    their own defaults; the checks here run for both.

    Example:
        >>> cfg = RunConfig(env=EnvConfig("CartPole-v1", num_envs=4),
        ...                 trainer=TrainerConfig(total_frames=64, frames_per_batch=32))
        >>> cfg.hidden_sizes
        (64, 64)
        >>> RunConfig(env=EnvConfig("CartPole-v1", num_envs=3),
        ...           trainer=TrainerConfig(total_frames=64, frames_per_batch=32))
        Traceback (most recent call last):
        ...
        rlpace.trainers._config.ConfigError: trainer.frames_per_batch: expected a multiple of env.num_envs (3), got 32; make frames_per_batch divisible by env.num_envs
    """

    env: EnvConfig = field(default_factory=lambda: EnvConfig("CartPole-v1"))
    """The environment."""
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    """Loop budget and cadence."""
    seed: int = 0
    """Seeds torch, numpy, random and the env."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden widths of the MLPs."""
    lr: float = 3e-4
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount."""

    def __post_init__(self) -> None:
        _hidden_sizes(self, "")
        _positive_float(self, "", "lr")
        _unit_float(self, "", "gamma")
        fpb = self.trainer.frames_per_batch
        _check(
            fpb % self.env.num_envs == 0,
            "trainer.frames_per_batch",
            f"a multiple of env.num_envs ({self.env.num_envs})",
            fpb,
            "make frames_per_batch divisible by env.num_envs",
        )


@dataclass(frozen=True)
class PPOConfig(RunConfig):
    """A whole PPO run: env, loop, network and loss settings (defaults tuned for CartPole).

    Example:
        >>> cfg = PPOConfig(env=EnvConfig("CartPole-v1"), mini_batch_size=64)
        >>> cfg.trainer.frames_per_batch // cfg.mini_batch_size
        32
        >>> PPOConfig(mini_batch_size=4096)
        Traceback (most recent call last):
        ...
        rlpace.trainers._config.ConfigError: mini_batch_size: expected at most trainer.frames_per_batch (2048), got 4096; lower mini_batch_size or raise trainer.frames_per_batch
    """

    env: EnvConfig = field(default_factory=lambda: EnvConfig("CartPole-v1", num_envs=8))
    """The environment (discrete or continuous actions)."""
    trainer: TrainerConfig = field(
        default_factory=lambda: TrainerConfig(total_frames=500_000, frames_per_batch=2048)
    )
    """Loop budget and cadence."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden widths of the actor and critic MLPs (tanh)."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over the run."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_epsilon: float = 0.2
    """PPO ratio clipping."""
    entropy_coeff: float = 0.01
    """Weight of the entropy bonus (0 turns it off; the entropy is logged either way)."""
    critic_coeff: float = 0.5
    """Weight of the value loss."""
    epochs: int = 10
    """Passes over each batch."""
    mini_batch_size: int = 256
    """Frames per gradient step; must divide into the batch."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip."""
    normalize_advantage: bool = True
    """Standardise advantages per mini-batch."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive_float(self, "", "clip_epsilon")
        _positive_float(self, "", "max_grad_norm")
        _positive_int(self, "", "epochs")
        _positive_int(self, "", "mini_batch_size")
        _unit_float(self, "", "gae_lambda")
        _check(self.entropy_coeff >= 0, "entropy_coeff", ">= 0", self.entropy_coeff, "set >= 0")
        _check(self.critic_coeff >= 0, "critic_coeff", ">= 0", self.critic_coeff, "set >= 0")
        fpb = self.trainer.frames_per_batch
        _check(
            self.mini_batch_size <= fpb,
            "mini_batch_size",
            f"at most trainer.frames_per_batch ({fpb})",
            self.mini_batch_size,
            "lower mini_batch_size or raise trainer.frames_per_batch",
        )

    @property
    def algo(self) -> str:
        """The algorithm's name, ``"ppo"``."""
        return "ppo"


@dataclass(frozen=True)
class SACConfig(RunConfig):
    """A whole SAC run (defaults tuned for Pendulum). Needs a continuous (Box) action space.

    Example:
        >>> cfg = SACConfig(utd_ratio=0.5)
        >>> cfg.updates_per_batch
        50
        >>> SACConfig(lr=-1.0)
        Traceback (most recent call last):
        ...
        rlpace.trainers._config.ConfigError: lr: expected a positive finite float, got -1.0; set lr > 0
    """

    env: EnvConfig = field(default_factory=lambda: EnvConfig("Pendulum-v1"))
    """The environment (continuous actions only)."""
    trainer: TrainerConfig = field(
        default_factory=lambda: TrainerConfig(total_frames=30_000, frames_per_batch=100)
    )
    """Loop budget and cadence."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Hidden widths of the actor and Q MLPs (ReLU)."""
    tau: float = 0.005
    """Soft target-network update rate."""
    batch_size: int = 256
    """Transitions sampled per gradient step."""
    buffer_size: int = 100_000
    """Replay-buffer capacity in transitions."""
    utd_ratio: float = 1.0
    """Update-to-data ratio: gradient steps per collected frame."""
    init_random_frames: int = 1000
    """Frames collected before the first gradient step."""
    alpha_init: float = 1.0
    """Initial entropy temperature (learned)."""
    prioritized: bool = False
    """Prioritized replay (``rlpace.data.PrioritizedSampler``): transitions are drawn in
    proportion to their last TD error, and the Q and temperature losses are weighted by
    the importance weights."""
    priority_alpha: float = 0.7
    """How strongly priorities shape sampling (0: uniform); with ``prioritized``."""
    priority_beta: float = 0.5
    """Importance-weight exponent (0: no correction, 1: full); with ``prioritized``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive_float(self, "", "utd_ratio")
        _positive_float(self, "", "alpha_init")
        _positive_int(self, "", "batch_size")
        _positive_int(self, "", "buffer_size")
        _positive_int(self, "", "init_random_frames", zero_ok=True)
        _unit_float(self, "", "tau")
        _check(
            isinstance(self.priority_alpha, int | float) and self.priority_alpha >= 0,
            "priority_alpha",
            "a float >= 0",
            self.priority_alpha,
            "set priority_alpha >= 0 (0 samples uniformly)",
        )
        _unit_float(self, "", "priority_beta")
        _check(
            self.batch_size <= self.buffer_size,
            "batch_size",
            f"at most buffer_size ({self.buffer_size})",
            self.batch_size,
            "lower batch_size or raise buffer_size",
        )
        _check(
            self.init_random_frames <= self.buffer_size,
            "init_random_frames",
            f"at most buffer_size ({self.buffer_size})",
            self.init_random_frames,
            "lower init_random_frames",
        )

    @property
    def algo(self) -> str:
        """The algorithm's name, ``"sac"``."""
        return "sac"

    @property
    def updates_per_batch(self) -> int:
        """Gradient steps after each batch: ``round(utd_ratio * frames_per_batch)``, at least 1."""
        return max(1, round(self.utd_ratio * self.trainer.frames_per_batch))


SCHEMAS: dict[str, type] = {"ppo": PPOConfig, "sac": SACConfig}


def config_to_dict(cfg: PPOConfig | SACConfig) -> dict[str, Any]:
    """A plain, YAML-ready dict of a config, with its ``algo`` key.

    Example:
        >>> d = config_to_dict(PPOConfig())
        >>> d["algo"], d["env"]["name"], d["hidden_sizes"]
        ('ppo', 'CartPole-v1', [64, 64])
    """

    def plain(value: Any) -> Any:
        if isinstance(value, tuple | list):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return {"algo": cfg.algo, **plain(dataclasses.asdict(cfg))}


def config_from_dict(data: dict[str, Any]) -> PPOConfig | SACConfig:
    """Build and check a config from a plain dict holding an ``algo`` key.

    Unknown keys, wrong types and missing values raise :class:`ConfigError` naming the key.

    Example:
        >>> config_from_dict({"algo": "sac", "trainer": {"total_frames": 500}}).trainer.total_frames
        500
        >>> config_from_dict({"algo": "ppo", "trainer": {"total_frame": 5}})
        Traceback (most recent call last):
        ...
        rlpace.trainers._config.ConfigError: trainer.total_frame: expected a key of TrainerConfig, got 'total_frame'; did you mean trainer.total_frames?
    """
    from omegaconf import OmegaConf
    from omegaconf import errors as oc_errors

    data = dict(data)
    algo = data.pop("algo", None)
    if algo not in SCHEMAS:
        raise ConfigError("algo", f"one of {sorted(SCHEMAS)}", algo, "pass algo=ppo or algo=sac")
    for key in _missing_keys(data):
        raise ConfigError(key, "a value", "???", f"set {key}=<value>")
    schema = _thawed_schema(SCHEMAS[algo])
    try:
        merged = OmegaConf.merge(schema, OmegaConf.create(data))
        return OmegaConf.to_object(merged)
    except oc_errors.ConfigKeyError as exc:
        key = str(exc.full_key)
        parent_path, _, leaf = key.rpartition(".")
        parent = _walk(SCHEMAS[algo](), parent_path) if parent_path else SCHEMAS[algo]()
        raise ConfigError(
            key,
            f"a key of {type(parent).__name__}",
            leaf,
            _did_you_mean(key, config_keys(algo)) or "remove it or fix its spelling",
        ) from None
    except oc_errors.MissingMandatoryValue as exc:
        raise ConfigError(
            str(exc.full_key), "a value", "???", f"set {exc.full_key}=<value>"
        ) from None
    except oc_errors.ValidationError as exc:
        raise ConfigError(
            str(exc.full_key),
            "a value of the declared type",
            str(exc).splitlines()[0],
            f"see the field of {SCHEMAS[algo].__name__}",
        ) from None


def config_keys(algo: str | None = None) -> list[str]:
    """Every settable key of an algorithm's config, dotted (``trainer.total_frames``).

    Args:
        algo: ``"ppo"``, ``"sac"``, or None for the keys of both.

    Example:
        >>> "trainer.total_frames" in config_keys("ppo"), "tau" in config_keys("ppo")
        (True, False)
    """
    names = sorted(SCHEMAS) if algo is None else [algo]
    keys: set[str] = {"algo"}

    def walk(d: dict[str, Any], prefix: str) -> None:
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                keys.add(f"{prefix}{k}")

    for name in names:
        data = config_to_dict(SCHEMAS[name]())
        data.pop("algo")
        walk(data, "")
    return sorted(keys)


def _did_you_mean(key: str, keys: list[str]) -> str | None:
    """``"did you mean X?"`` for a misspelt key: the same name at another level
    (``trainer.lr`` -> ``lr``), else the closest key by ``difflib``."""
    leaf = key.rpartition(".")[2]
    same_leaf = [k for k in keys if k.rpartition(".")[2] == leaf and k != key]
    close = same_leaf or difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    if not close:
        leaves = {k.rpartition(".")[2]: k for k in keys}
        close = [leaves[m] for m in difflib.get_close_matches(leaf, list(leaves), n=1)]
    return f"did you mean {close[0]}?" if close else None


def _thawed_schema(schema: type) -> Any:
    """The schema as a typed OmegaConf node that merges accept (frozen ones are read-only)."""
    from omegaconf import DictConfig, OmegaConf

    def thaw(node: DictConfig) -> None:
        OmegaConf.set_readonly(node, False)
        for key in node:
            child = node._get_node(key)
            if isinstance(child, DictConfig):
                thaw(child)

    node = OmegaConf.structured(schema)
    thaw(node)
    return node


def _missing_keys(data: dict[str, Any], prefix: str = "") -> list[str]:
    found = []
    for key, value in data.items():
        if isinstance(value, dict):
            found += _missing_keys(value, f"{prefix}{key}.")
        elif value == "???":
            found.append(f"{prefix}{key}")
    return found


def _walk(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def register_configs() -> None:
    """Register the schemas with Hydra's ConfigStore as ``schema/ppo`` and ``schema/sac``.

    Example:
        >>> register_configs()
        >>> from hydra.core.config_store import ConfigStore
        >>> "ppo.yaml" in ConfigStore.instance().repo["schema"]
        True
    """
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for name, schema in SCHEMAS.items():
        # a typed node, not the frozen class: Hydra must be able to apply overrides to it
        store.store(group="schema", name=name, node=_thawed_schema(schema))


def load_config(overrides: list[str] | tuple[str, ...] = ()) -> PPOConfig | SACConfig:
    """Compose the YAML presets with Hydra overrides and check the result.

    Args:
        overrides: Hydra override strings, e.g. ``["algo=sac", "trainer.total_frames=500"]``.

    Raises:
        ConfigError: unknown key, wrong type, missing value or impossible value.

    Example:
        >>> cfg = load_config(["algo=ppo", "env=CartPole-v1", "seed=3", "trainer.total_frames=4096"])
        >>> type(cfg).__name__, cfg.seed, cfg.trainer.total_frames, cfg.env.name
        ('PPOConfig', 3, 4096, 'CartPole-v1')
        >>> load_config(["algo=ppo", "trainer.totl_frames=1"])
        Traceback (most recent call last):
        ...
        rlpace.trainers._config.ConfigError: trainer.totl_frames: expected a key of the config, got 'trainer.totl_frames=1'; did you mean trainer.total_frames?
        >>> load_config(["trainer.lr=1e-3"])  # lr is a root key, not the loop's
        Traceback (most recent call last):
        ...
        rlpace.trainers._config.ConfigError: trainer.lr: expected a key of the config, got 'trainer.lr=1e-3'; did you mean lr?
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    register_configs()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            composed = compose(
                config_name="train", overrides=list(overrides), return_hydra_config=True
            )
    except HydraException as exc:
        message = str(exc)
        bad = next((o for o in overrides if o.split("=")[0].lstrip("+~") in message), None)
        if bad is not None and "Could not override" in message:
            key = bad.split("=")[0].lstrip("+~")
            algo = next((o.partition("=")[2] for o in overrides if o.startswith("algo=")), "ppo")
            hint = _did_you_mean(key, config_keys(algo if algo in SCHEMAS else None))
            raise ConfigError(
                bad.split("=")[0],
                "a key of the config",
                bad,
                hint or "check its spelling (see rlpace/trainers/conf)",
            ) from None
        if bad is not None and "Error merging override" in message:
            key, _, value = bad.partition("=")
            detail = str(exc.__cause__ or message).splitlines()[0]
            raise ConfigError(
                key, "a value of the field's declared type", value, f"fix it ({detail.strip()})"
            ) from None
        raise ConfigError(
            "overrides", "valid Hydra overrides", list(overrides), message.splitlines()[0]
        ) from None
    algo = composed.hydra.runtime.choices.get("algo")
    data = OmegaConf.to_container(composed, resolve=False)
    data.pop("hydra", None)
    return config_from_dict({**data, "algo": algo})
