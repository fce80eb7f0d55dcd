import pytest
import torch

from rlpace.envs.llm import (
    TextCodec,
    as_transformers_tokenizer,
    default_tokenizer,
    load_tokenizer,
)

TEXTS = [
    "What is 12 + 7? #### 19",
    "  leading spaces, tabs\tand\nnewlines  ",
    "héllo wörld — ünïcode 🙂 中文",
    "<|user|>Hi\n<|assistant|>Hello<eos>",
    "",
]


@pytest.mark.parametrize("wrap", ["tokenizers", "transformers"])
def test_round_trip_text_tokens_text(wrap):
    tok = default_tokenizer() if wrap == "tokenizers" else as_transformers_tokenizer()
    codec = TextCodec(tok)
    ids = codec.encode_batch(TEXTS)
    assert all(all(0 <= t < codec.vocab_size for t in seq) for seq in ids)
    assert codec.decode_batch(ids) == TEXTS


def test_both_tokenizer_kinds_give_the_same_ids():
    a = TextCodec(default_tokenizer()).encode_batch(TEXTS)
    b = TextCodec(as_transformers_tokenizer()).encode_batch(TEXTS)
    assert a == b
    hf = as_transformers_tokenizer()
    assert hf(TEXTS[0], add_special_tokens=False)["input_ids"] == a[0]


def test_default_tokenizer_specials_and_digits():
    tok = default_tokenizer()
    assert tok.token_to_id("<pad>") == 0 and tok.token_to_id("<eos>") == 1
    for marker in ("<|system|>", "<|user|>", "<|assistant|>"):
        assert tok.encode(f"x{marker}y").tokens.count(marker) == 1
    assert tok.encode("1234").tokens == ["1", "2", "3", "4"]


def test_tokenizer_asset_is_small_and_rebuilds_identically(tmp_path):
    import importlib.util
    from pathlib import Path

    import rlpace.envs.llm as llm

    assets = Path(llm.__file__).parent / "assets"
    total = sum(p.stat().st_size for p in assets.iterdir() if p.is_file())
    assert total < 1_000_000
    spec = importlib.util.spec_from_file_location("build_tokenizer", assets / "build_tokenizer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rebuilt = module.build()
    shipped = default_tokenizer()
    assert rebuilt.get_vocab() == shipped.get_vocab()
    assert rebuilt.encode(TEXTS[2]).ids == shipped.encode(TEXTS[2]).ids


def test_non_utf8_bytes_decode_to_replacement_character():
    codec = TextCodec(default_tokenizer())
    ids = codec.encode_batch(["é"])[0]
    assert len(ids) == 2  # two UTF-8 bytes, two byte-level tokens
    assert codec.decode_batch([ids[:1]]) == ["\ufffd"]


def test_out_of_vocabulary_ids_raise():
    codec = TextCodec(default_tokenizer())
    with pytest.raises(ValueError, match="outside the tokenizer's vocabulary"):
        codec.decode_batch([[5, 9999]])
    with pytest.raises(ValueError, match="outside"):
        codec.decode_batch([torch.tensor([-1])])


def test_names_are_refused_never_downloaded():
    with pytest.raises(TypeError, match="never downloads"):
        TextCodec("gpt2")
    with pytest.raises(FileNotFoundError, match="never downloads"):
        load_tokenizer("gpt2")


def test_load_tokenizer_reads_a_local_directory(tmp_path):
    default_tokenizer().save(str(tmp_path / "tokenizer.json"))
    assert load_tokenizer(tmp_path).get_vocab_size() == 512


def test_wrong_tokenizer_type_is_explained():
    with pytest.raises(TypeError, match="fast tokenizer"):
        TextCodec(object())
    with pytest.raises(TypeError, match="tokenizers.Tokenizer"):
        as_transformers_tokenizer(object())


def test_bare_tokenizer_has_no_pad_or_eos(bare_tok):
    codec = TextCodec(bare_tok)
    assert codec.pad_token_id is None and codec.eos_token_id is None
    assert TextCodec(bare_tok, eos_token_id=1).eos_token_id == 1


def test_text_that_is_not_unicode_is_explained():
    codec = TextCodec(default_tokenizer())
    with pytest.raises(ValueError, match="text 1 is not valid Unicode"):
        codec.encode_batch(["fine", "bad \udcff byte"])
    with pytest.raises(TypeError, match="decode bytes first"):
        codec.encode_batch(["fine", b"bytes"])


def test_env_reports_undecodable_responses_clearly(tok):
    from rlpace.envs.llm import LLMEnv

    env = LLMEnv(["q"], tokenizer=tok, batch_size=1)
    td = env.reset()
    td["text_response"] = ["bad \udcff"]
    with pytest.raises(ValueError, match="not valid Unicode"):
        env.step(td)
