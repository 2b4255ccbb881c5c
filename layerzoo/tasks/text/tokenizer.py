"""Tokenizers for the text task: the byte-level fallback, or a local Hugging Face tokenizer folder
(tokenizer.json, read with the `tokenizers` library), and training a byte-level BPE for users who
have none.

Every document is stored as [EOS, tokens...]: the end-of-document token also begins the next one,
so the first token of a document is predicted from EOS alone, and its last token predicts EOS.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ...errors import OptionError

EOS_NAMES = ("<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>", "<|eot_id|>")
# What AutoTokenizer reads from a folder (the chat template is a file of its own since transformers 5).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja", "chat_template.json")
BPE_EOS = "<|endoftext|>"


class ByteTokenizer:
    """UTF-8 bytes 0..255, and EOS = 256: 257 tokens."""

    name = "bytes"
    vocab_size = 257
    eos_id = 256
    identity = "bytes-v1"

    @property
    def files(self) -> dict[str, Path]:
        """Empty: no file describes these tokens (HFTokenizer.files says what the files are for)."""
        return {}

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        return [np.frombuffer(text.encode("utf-8"), dtype=np.uint8) for text in texts]

    @cached_property
    def token_bytes(self) -> np.ndarray:
        """(vocab_size,) the UTF-8 bytes each token stands for (EOS: none)."""
        return np.array([1] * 256 + [0], dtype=np.int64)

    def decode(self, ids: Iterable[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


class HFTokenizer:
    """A Hugging Face tokenizer.json (in a folder, or the file itself). EOS: tokenizer_config.json's
    eos_token when the folder has one, else the first of EOS_NAMES in the vocabulary."""

    def __init__(self, path: str | Path):
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise OptionError("tokenizer", "a tokenizer folder needs the tokenizers package: "
                                           "pip install 'layerzoo[text]'") from None
        path = Path(path).expanduser()
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise OptionError("tokenizer", f"{path}: no tokenizer.json there (a Hugging Face tokenizer folder, or 'bytes')")
        self.name = str(path)
        text = file.read_bytes()
        try:
            self.tokenizer = Tokenizer.from_str(text.decode("utf-8"))
        except Exception as error:  # the library raises its own Exception type, with a long message
            raise OptionError("tokenizer", f"{file}: not a tokenizer.json ({str(error).splitlines()[0][:120]})") from None
        # text that spells a special token is encoded as text: only our separators are EOS
        self.tokenizer.encode_special_tokens = True
        self.vocab_size = self.tokenizer.get_vocab_size(with_added_tokens=True)
        config = file.parent / "tokenizer_config.json"
        # what it was read from and what AutoTokenizer reads beside it, by the names a transformers
        # folder gives them (a run folder and its export keep them: its chat template too)
        beside = {name: file.parent / name for name in TOKENIZER_FILES
                  if name != "tokenizer.json" and (file.parent / name).is_file()}
        self.files = {"tokenizer.json": file, **beside}
        self.eos_id = self._eos_id(config)
        self.identity = f"hf-{hashlib.blake2b(text, digest_size=16).hexdigest()}-eos{self.eos_id}"

    def _eos_id(self, config: Path) -> int:
        names = list(EOS_NAMES)
        if config.is_file():
            eos = read_config(config).get("eos_token")
            eos = eos.get("content") if isinstance(eos, dict) else eos
            names = [eos] if isinstance(eos, str) else names
        for name in names:
            if (token := self.tokenizer.token_to_id(name)) is not None:
                return token
        raise OptionError("tokenizer", f"{self.name}: no end-of-document token (looked for {', '.join(names)})")

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's ids, those of the library's one-text encode: the whole batch goes to its batch
        encoder, which encodes the texts in parallel on its thread pool (TOKENIZERS_PARALLELISM,
        RAYON_NUM_THREADS); the rate is the library's (the text_data benchmark sets the two side
        by side), reading the ids back into numpy is all that runs here."""
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)  # fast: no offsets
        return [np.asarray(encoding.ids, dtype=np.int64) for encoding in encode(texts, add_special_tokens=False)]

    @cached_property
    def token_bytes(self) -> np.ndarray:
        """(vocab_size,) the UTF-8 bytes each token stands for, for bits per byte: byte-level
        tokens (GPT-2's alphabet, one character per byte) count their characters, SentencePiece's
        `<0xNN>` one byte and `▁` one space; special tokens none."""
        from tokenizers import pre_tokenizers

        alphabet = set(pre_tokenizers.ByteLevel.alphabet())
        special = {token.content for token in self.tokenizer.get_added_tokens_decoder().values() if token.special}
        counts = np.zeros(self.vocab_size, dtype=np.int64)
        for token, index in self.tokenizer.get_vocab(with_added_tokens=True).items():
            if token in special:
                continue
            if token.startswith("<0x") and token.endswith(">") and len(token) == 6:
                counts[index] = 1
            else:
                counts[index] = sum(1 if char in alphabet else len(char.encode("utf-8")) for char in token.replace("▁", " "))
        return counts

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode(list(ids))


def counted(texts: Iterable[str], bar) -> Iterator[str]:
    """`texts`, each counted on the progress bar; once the last is read, the bar says what the
    trainer does next (the merges: the rest of the training time, without a count of its own)."""
    for text in texts:
        bar.update()
        yield text
    bar.set_postfix_str("read; computing merges")


def read_config(path: Path) -> dict:
    """A tokenizer_config.json, as a dict; OptionError("tokenizer") naming it when it is not a JSON object."""
    try:
        config = json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError; RecursionError: deep nesting
        raise OptionError("tokenizer", f"{path}: not valid JSON ({error})") from None
    if not isinstance(config, dict):
        raise OptionError("tokenizer", f"{path}: expected a JSON object, got {type(config).__name__}")
    return config


def load_tokenizer(name: str) -> ByteTokenizer | HFTokenizer:
    """'bytes', or a tokenizer folder (or tokenizer.json) path."""
    return ByteTokenizer() if name == "bytes" else HFTokenizer(name)


def train_bpe(texts: Iterable[str], vocab_size: int, out_dir: str | Path, count: int | None = None,
              progress: bool = False) -> Path:
    """Train a byte-level BPE of vocab_size tokens (256 bytes, EOS, merges) on `texts` (`count`
    of them, when known: the progress bar's total) and write out_dir/tokenizer.json and
    tokenizer_config.json (so that transformers reads the folder too)."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        raise OptionError("tokenizer", "training a tokenizer needs the tokenizers package: pip install 'layerzoo[text]'") from None
    if vocab_size < 257:
        raise OptionError("vocab_size", f"a byte-level BPE needs >= 257 tokens (256 bytes and EOS), got {vocab_size}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    # tqdm rather than the trainer's own bars, which draw on a terminal only: a log shows this one too
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BPE_EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    with tqdm(total=count, unit=" documents", desc=f"training a byte-level BPE of {vocab_size} tokens",
              disable=not progress, dynamic_ncols=True, mininterval=0.5) as bar:
        tokenizer.train_from_iterator(counted(texts, bar), trainer, length=count)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": BPE_EOS, "bos_token": BPE_EOS}
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")
    return out_dir
