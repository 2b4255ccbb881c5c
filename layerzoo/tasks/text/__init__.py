"""Text: local corpora (plain text, JSONL, Parquet, the standard library's sources), tokenizers,
token shards cached by content, and the `text` task that samples windows of them."""

from .corpus import documents
from .discovery import resolve_files
from .task import Text
from .tokenizer import ByteTokenizer, HFTokenizer, load_tokenizer, train_bpe

__all__ = ["ByteTokenizer", "HFTokenizer", "Text", "documents", "load_tokenizer", "resolve_files", "train_bpe"]
