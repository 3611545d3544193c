"""Rows cut into windows GLiNER trains on whole, and what it still cannot keep (METHOD.md
section 4 gives the rules and the figures behind the token estimate).

What GLiNER loses of a long row without an error (urchade/GLiNER, commit
c2bb58ddf569480ef7a9de03bef653723a42f5c2, `gliner/config.py` and
`gliner/data_processing/processor.py`):

- `UniEncoderSpanProcessor.preprocess_example` keeps the first `max_len` words and enumerates
  spans up to `max_width` words: a wider entity is never learnt;
- `BaseProcessor.prepare_inputs` puts `<<ENT>>` and a label per type, then `<<SEP>>`, before
  the words; `tokenize_inputs` truncates at the tokenizer's `model_max_length` silently;
- `batch_generate_class_mappings` gives a row its positives plus its `ner_negatives`, else up
  to `len(ner) * max_neg_type_ratio` labels sampled from the batch, shuffled, cut to
  `max_types`: a dropped positive's mentions are trained as no entity.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from itertools import islice
from typing import Any, NamedTuple

from builders.errors import InvalidValue, ModelUnavailable, opt

#: GLiNER's defaults (`GLiNERConfig`, and deberta-v3's 512 positions for the encoder's input).
MAX_WORDS = 384
MAX_WIDTH = 12
MAX_TOKENS = 512
MAX_TYPES = 25
#: `GLiNERConfig.max_neg_type_ratio`: in-batch negative types per mention, at most.
NEG_TYPE_RATIO = 1
#: The prompt's markers (`GLiNERConfig.ent_token`, `sep_token`): tokens GLiNER adds to the
#: tokenizer, one token each.
ENT_TOKEN, SEP_TOKEN = "<<ENT>>", "<<SEP>>"
#: What deberta-v3's tokenizer adds around a sequence: [CLS] and [SEP].
ESTIMATE_SPECIAL = 2
#: Distinct words whose token counts a tokenizer's count keeps at most.
CACHE_WORDS = 2_000_000
#: `estimate_tokens`: ASCII letters per token, digits per token (rounded up per run).
LETTERS_PER_TOKEN, DIGITS_PER_TOKEN = 3, 2
#: Words that end a sentence: a window is cut after one where it can.
SENTENCE_ENDS = frozenset({".", "!", "?", "。", "！", "？"})
_RUN = re.compile(r"[A-Za-z]+|[0-9]+|[^\W\d_]+|.", re.S)


Span = tuple[int, int, str]  # start, end (exclusive), label


class Row(NamedTuple):
    """One training row: its words, its mentions and negative spans (`end` exclusive), its
    label-level negatives (None: the row has no `ner_negatives` key), and where it was read
    (for messages; windows have none)."""

    tokens: list[str]
    spans: list[Span]
    negatives: list[str] | None
    negative_spans: list[Span]
    where: str = ""


@lru_cache(maxsize=1 << 16)
def estimate_tokens(word: str) -> int:
    """Subword tokens of one word, counted high (METHOD.md section 4), after NFKC (deberta-v3's
    SentencePiece normalisation); at least one."""
    text = unicodedata.normalize("NFKC", word)
    n = 0
    for run in _RUN.findall(text):
        if run[0].isascii() and run[0].isalpha():
            n += math.ceil(len(run) / LETTERS_PER_TOKEN)
        elif run[0].isascii() and run[0].isdigit():
            n += math.ceil(len(run) / DIGITS_PER_TOKEN)
        else:
            n += len(run)
    lead = 0 if text[:1].isascii() and text[:1].isalpha() else 1
    return max(1, n + lead)


class TokenCount:
    """How many tokens words and labels take: estimated (`name` None) or by a tokenizer."""

    def __init__(self, tokenizer: str | None = None) -> None:
        self.name = tokenizer
        self._tok: Any = None
        self._cache: dict[str, int] = {}
        self.special = ESTIMATE_SPECIAL
        if tokenizer is not None:
            self._tok = load_tokenizer(tokenizer)
            self.special = int(self._tok.num_special_tokens_to_add(pair=False))

    def words(self, rows: Sequence[Sequence[str]]) -> list[list[int]]:
        """Each word's tokens, row by row: each distinct word tokenized once, alone, as GLiNER's
        pre-split call (`is_split_into_words`) tokenizes it."""
        if self._tok is None:
            return [[estimate_tokens(w) for w in words] for words in rows]
        new = sorted({w for words in rows for w in words if w not in self._cache})
        if new:
            if len(self._cache) + len(new) > CACHE_WORDS:
                self._cache.clear()
            enc = self._tok([[w] for w in new], is_split_into_words=True, add_special_tokens=False)
            self._cache.update(zip(new, map(len, enc["input_ids"]), strict=True))
        return [[self._cache[w] for w in words] for words in rows]

    def label(self, label: str) -> int:
        """A label's tokens in the prompt, `<<ENT>>` included (GLiNER passes the label as one
        pre-split word)."""
        if self._tok is None:
            return 1 + max(1, sum(estimate_tokens(part) for part in label.split()))
        return 1 + len(
            self._tok([label], is_split_into_words=True, add_special_tokens=False)["input_ids"]
        )

    def describe(self) -> str:
        return f"tokenizer {self.name}" if self.name else "estimated"


def load_tokenizer(name: str) -> Any:
    """A tokenizer from a local folder or the Hub cache (never the network), with GLiNER's
    prompt markers added."""
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(name, local_files_only=True)
    except Exception as exc:  # transformers raises OSError, ValueError, ImportError, ...
        raise ModelUnavailable(
            f"{opt('tokenizer', name)}: no tokenizer loads from it (a local tokenizer folder, or a Hub "
            f"name in the local cache): {type(exc).__name__}: {str(exc).splitlines()[0]}"
        ) from None
    tok.add_tokens([ENT_TOKEN, SEP_TOKEN], special_tokens=True)
    return tok


@dataclass(frozen=True)
class Limits:
    """What GLiNER keeps of a row (its defaults by default); `windows` False writes rows whole."""

    max_words: int = MAX_WORDS
    max_width: int = MAX_WIDTH
    max_tokens: int = MAX_TOKENS
    max_types: int = MAX_TYPES
    windows: bool = True

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (not isinstance(value, int) or value < 1):
                raise InvalidValue(f"{opt(f.name, repr(value))}: must be 1 or more")


@dataclass
class Losses:
    """What GLiNER cannot keep of the rows it is given, at most (unknown batch labels costed as
    the costliest). Words a tokenizer gives no token are skipped by GLiNER's word mask, so the
    mentions after them are misplaced (`mentions_shifted`)."""

    rows_over_words: int = 0
    words_over: int = 0
    rows_over_tokens: int = 0
    tokens_over: int = 0
    words_past_tokens: int = 0
    mentions_cut: int = 0
    mentions_too_wide: int = 0
    rows_over_types: int = 0
    words_without_tokens: int = 0
    mentions_shifted: int = 0

    def add(self, other: Losses) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Budget:
    """The limits, the token counts, and the costliest label of the export."""

    limits: Limits
    count: TokenCount
    longest: int = 0
    _labels: dict[str, int] = field(default_factory=dict)

    def label_cost(self, label: str) -> int:
        if label not in self._labels:
            self._labels[label] = self.count.label(label)
        return self._labels[label]

    def see_labels(self, labels: Iterator[str]) -> None:
        """Take the export's mention labels: the batch negatives GLiNER may sample."""
        for label in labels:
            self.longest = max(self.longest, self.label_cost(label))

    def prompt(self, positives: set[str], mentions: int, negatives: list[str] | None) -> int:
        """Tokens of the largest prompt GLiNER can give a row, `<<SEP>>` and specials included."""
        cap = self.limits.max_types
        if negatives is not None:
            costs = sorted((self.label_cost(x) for x in positives | set(negatives)), reverse=True)
        else:
            unknown = min(mentions * NEG_TYPE_RATIO, cap)
            own = sorted((self.label_cost(x) for x in positives), reverse=True)
            costs = [self.longest] * unknown + own
        return 1 + sum(costs[:cap]) + self.count.special

    def types(self, positives: set[str], mentions: int, negatives: list[str] | None) -> int:
        """The most types GLiNER can give a row."""
        if negatives is not None:
            return len(positives | set(negatives))
        return len(positives) + mentions * NEG_TYPE_RATIO

    def types_cap(self, row: Row) -> int:
        """The types a window of `row` may have: `max_types`, unless no window with a mention
        can stay within it (then any: the windows are not cut for it, and it is counted)."""
        least = len(set(row.negatives)) + 1 if row.negatives is not None else 1 + NEG_TYPE_RATIO
        return self.limits.max_types if least <= self.limits.max_types else 1 << 30


def _free_cuts(n: int, spans: Sequence[Span]) -> list[int]:
    """The places (1..n) a row may be cut at: none inside a span."""
    inside = [0] * (n + 2)
    for start, end, _ in spans:
        if end - start > 1:
            inside[start + 1] += 1
            inside[end] -= 1
    cuts, depth = [], 0
    for p in range(1, n + 1):
        depth += inside[p]
        if depth == 0 or p == n:
            cuts.append(p)
    return cuts


def cut(row: Row, costs: list[int], budget: Budget) -> list[tuple[int, int]]:
    """The row's windows [(start, end)], in order, covering every word, each as long as fits (a
    piece between two free cuts that cannot fit stands alone; `losses` counts it)."""
    n = len(row.tokens)
    if not budget.limits.windows or n == 0 or _fits(row, costs, budget, 0, n):
        return [(0, n)]
    by_end = sorted(row.spans, key=lambda s: s[1])
    cuts = _free_cuts(n, [*row.spans, *row.negative_spans])
    out: list[tuple[int, int]] = []
    a = 0
    while a < n:
        best = _longest(row, costs, budget, a, [c for c in cuts if c > a], by_end)
        out.append((a, best))
        a = best
    return out


def _longest(
    row: Row, costs: list[int], budget: Budget, a: int, cuts: list[int], by_end: list[Span]
) -> int:
    """The farthest free cut whose window from `a` fits, or the first where none does; rather
    the last sentence end that fits, where that keeps at least half the window."""
    lim, cap = budget.limits, budget.types_cap(row)
    best, words, m, i = cuts[0], 0, 0, 0
    end: int | None = None
    labels: set[str] = set()
    while i < len(by_end) and by_end[i][1] <= a:
        i += 1
    prev = a
    for b in cuts:
        words += sum(costs[prev:b])
        prev = b
        while i < len(by_end) and by_end[i][1] <= b:
            labels.add(by_end[i][2])
            m, i = m + 1, i + 1
        tokens = words + budget.prompt(labels, m, row.negatives)
        types = budget.types(labels, m, row.negatives) if m else 0
        if b - a > lim.max_words or tokens > lim.max_tokens or types > cap:
            break
        best = b
        if row.tokens[b - 1] in SENTENCE_ENDS:
            end = b
    if best < len(row.tokens) and end is not None and 2 * (end - a) >= best - a:
        return end
    return best


def _fits(row: Row, costs: list[int], budget: Budget, a: int, b: int) -> bool:
    lim = budget.limits
    labels = {lab for s, e, lab in row.spans if a <= s and e <= b}
    m = sum(1 for s, e, _ in row.spans if a <= s and e <= b)
    prompt = budget.prompt(labels, m, row.negatives)
    types = budget.types(labels, m, row.negatives) if m else 0
    return (
        b - a <= lim.max_words
        and sum(costs[a:b]) + prompt <= lim.max_tokens
        and types <= budget.types_cap(row)
    )


def window(row: Row, a: int, b: int) -> Row:
    """Words a..b of a row, its spans inside (shifted), its negatives whole."""

    def inside(spans: list[Span]) -> list[Span]:
        return [(s - a, e - a, lab) for s, e, lab in spans if a <= s and e <= b]

    return Row(row.tokens[a:b], inside(row.spans), row.negatives, inside(row.negative_spans))


def losses(row: Row, costs: list[int], budget: Budget) -> Losses:
    """What GLiNER drops of `row` given whole (see `Losses`)."""
    lim, out = budget.limits, Losses()
    positives = {lab for _, _, lab in row.spans}
    n = len(row.tokens)
    given = keep = min(n, lim.max_words)
    room = lim.max_tokens - budget.prompt(positives, len(row.spans), row.negatives)
    used = 0
    for k in range(given):  # GLiNER keeps a word whose first token is in (its word mask)
        if used + min(1, costs[k]) > room:
            keep = k
            break
        used += costs[k]
    over = sum(costs[:given]) - room
    out.rows_over_words = int(n > lim.max_words)
    out.words_over = n - given
    out.rows_over_tokens = int(over > 0)
    out.tokens_over = max(0, over)
    out.words_past_tokens = given - keep
    out.mentions_cut = sum(1 for _, e, _ in row.spans if e > keep)
    out.mentions_too_wide = sum(1 for s, e, _ in row.spans if e <= keep and e - s > lim.max_width)
    types = budget.types(positives, len(row.spans), row.negatives) if row.spans else 0
    out.rows_over_types = int(types > lim.max_types)
    blank = [k for k in range(keep) if costs[k] == 0]
    out.words_without_tokens = len(blank)
    out.mentions_shifted = sum(1 for s, e, _ in row.spans if blank and e <= keep and s > blank[0])
    return out


@dataclass
class Cut:
    """One row's windows and what GLiNER still cannot keep of them, and of the row whole."""

    windows: list[Row]
    kept: Losses
    whole: Losses


def cut_rows(rows: Iterator[Row], budget: Budget, chunk: int = 512) -> Iterator[Cut]:
    """Each row's windows with their losses and the row's own (tokens counted per `chunk`)."""
    while part := list(islice(rows, chunk)):
        for row, costs in zip(part, budget.count.words([r.tokens for r in part]), strict=True):
            yield _cut_one(row, costs, budget)


def _cut_one(row: Row, costs: list[int], budget: Budget) -> Cut:
    whole = losses(row, costs, budget)
    spans = cut(row, costs, budget)
    if len(spans) == 1:
        return Cut([row], whole, whole)
    kept = Losses()
    parts = []
    for a, b in spans:
        part = window(row, a, b)
        kept.add(losses(part, costs[a:b], budget))
        parts.append(part)
    return Cut(parts, kept, whole)
