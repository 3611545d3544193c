"""Labels as length buckets: one tokenizer call, no padding, large batches, one copy back.

    plan = tokenise(label_tokenizer(tok, max_length), labels)   one call of the Rust fast tokenizer
    for positions, length, n in plan.batches(rows):      every row of a batch has the same length
        vectors[positions[:n]] = run(ids)[:n]            (the runtime: torch, ONNX or OpenVINO)

Labels are 3-8 tokens: padding and tokenising batch by batch cost more than the model on a
GPU. Labels of one token length run together (the attention mask is all ones), and each
batch's vectors are written at their input positions.

Batches are canonical: every batch of one token length has the same number of rows (the last
one filled up with repeats of its first label). A label's vector then depends on the label, its
length and the batch size only, never on its batch company (batch shape changes float32
results by ~1e-7), so caches filled in other runs give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from builders.deferred import np

#: Tokens per batch at most (rows x length), whatever the row limit: bounds activation memory.
TOKENS_PER_ROW = 32


@dataclass(frozen=True)
class TokenPlan:
    """Every label's token ids, flat, with offsets and lengths: what the batches are cut from."""

    flat: np.ndarray  # int64, every label's ids one after another
    offsets: np.ndarray  # int64 (n,): where each label's ids start in `flat`
    lengths: np.ndarray  # int64 (n,)

    def __len__(self) -> int:
        return len(self.lengths)

    def batches(
        self, rows: int, tokens: int | None = None
    ) -> Iterator[tuple[np.ndarray, int, int]]:
        """(input positions, token length, real rows) per batch, shortest length first, each
        length's batches of one size (at most `rows`, and `tokens` tokens, default rows x
        TOKENS_PER_ROW); a last, short batch is filled up with repeats of its first position."""
        budget = tokens or rows * TOKENS_PER_ROW
        order = np.argsort(self.lengths, kind="stable")
        sorted_len = self.lengths[order]
        bounds = np.flatnonzero(np.diff(sorted_len)) + 1
        for group in np.split(order, bounds):
            if not len(group):
                continue
            length = int(self.lengths[group[0]])
            step = max(1, min(rows, budget // max(length, 1)))
            for start in range(0, len(group), step):
                pos = group[start : start + step]
                n = len(pos)
                if n < step:
                    pos = np.concatenate([pos, np.repeat(pos[:1], step - n)])
                yield pos, length, n

    def ids(self, positions: np.ndarray, length: int) -> np.ndarray:
        """The (len(positions), length) int64 id matrix of one batch (its labels have `length`)."""
        return self.flat[self.offsets[positions][:, None] + np.arange(length)]


def label_tokenizer(tokenizer: Any, max_length: int) -> Any:
    """A copy of a `tokenizers.Tokenizer` that truncates at `max_length` and never pads (the
    model's own is left as it is)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.no_padding()
    tok.enable_truncation(max_length)
    return tok


def tokenise(tokenizer: Any, labels: Sequence[str]) -> TokenPlan:
    """Tokenise every label in one call of a `tokenizers.Tokenizer` (a `label_tokenizer`)."""
    encodings = tokenizer.encode_batch_fast(list(labels), add_special_tokens=True)
    lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
    total = int(lengths.sum())
    flat = np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.int64, count=total)
    offsets = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    return TokenPlan(flat, offsets, lengths)
