"""GLiNER's own data-loading code, copied for the export tests (gliner cannot be installed here).

`pip install gliner` would move transformers (5.23 -> <5.17) and huggingface_hub, which this
project pins; with `--no-deps` in a throwaway venv gliner 0.2.29 imports offline, and its
`batch_generate_class_mappings` and `evaluate_ner.create_dataset` read the same keys as the
copies below.

Source: urchade/GLiNER, commit c2bb58ddf569480ef7a9de03bef653723a42f5c2, Apache License 2.0
(its LICENSE file). Copied verbatim, docstrings left out,
except where marked `# adapted`:
- `load_json_data`                  train.py (how the trainer reads its training json)
- `get_negatives`, `prepare_span_idx`  gliner/data_processing/utils.py
- `batch_generate_class_mappings`, `get_dict`, `prepare_span_labels`
                                    gliner/data_processing/processor.py (BaseProcessor,
                                    UniEncoderSpanProcessor); methods made functions, the
                                    processor config passed as arguments
- `open_content`, `process`, `create_dataset`
                                    gliner/evaluation/evaluate_ner.py
- `prepare_inputs`, `select_entities`, `tokenize_inputs`
                                    gliner/data_processing/processor.py (BaseProcessor: how
                                    the label prompt goes before the words and the encoder's
                                    tokenizer cuts prompt + words); methods made functions, the
                                    config's `ent_token` / `sep_token` (GLiNERConfig's
                                    defaults), the tokenizer and `prepare_word_mask` passed as
                                    arguments, `_maybe_remap_entities` and
                                    `_extra_prompt_tokens` (the base class's: no change, no
                                    tokens) inlined, `precomputed_prompts_mode` False
- `prepare_word_mask`               gliner/data_processing/utils.py
- `flatten_for_eval`, `extract_tp_actual_correct`, `_prf_divide` (without its warnings)
                                    gliner/evaluation/utils.py
- `compute_prf` (micro), `ner_items` gliner/evaluation/evaluator.py (`BaseEvaluator.compute_prf`
                                    with `average="micro"`; `BaseNEREvaluator.transform_data`'s
                                    `[label, (start, end)]` items for one sentence)
- `preprocess_example`, `create_labels`
                                    gliner/data_processing/processor.py (UniEncoderSpanProcessor:
                                    the `max_len` word cut, with its warning, and the span
                                    labels up to `max_width`); the config's `max_len` and
                                    `max_width` passed as arguments
"""

# ruff: noqa
# mypy: ignore-errors
# fmt: off

import glob
import json
import os
import random
from collections import defaultdict
import warnings
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch


def load_json_data(path: str):
    """Load JSON dataset."""
    with open(path, "r", encoding="utf-8") as f:
        return json.load(f)


def get_negatives(batch_list: List[Dict], sampled_neg: int = 5, key="ner") -> List[str]:
    element_types = set()
    for b in batch_list:
        if b.get(key, False):
            types = {el[-1] for el in b[key]}
            element_types.update(types)

    element_types = list(element_types)
    selected_elements = random.sample(element_types, k=min(sampled_neg, len(element_types)))
    return selected_elements


def prepare_span_idx(num_tokens, max_width):
    starts = torch.arange(num_tokens, dtype=torch.long).unsqueeze(1).expand(-1, max_width).reshape(-1)
    offsets = torch.arange(max_width, dtype=torch.long).unsqueeze(0).expand(num_tokens, -1).reshape(-1)
    return torch.stack([starts, starts + offsets], dim=1)


def batch_generate_class_mappings(
    batch_list: List[Dict],
    negatives: Optional[List[str]] = None,
    key: str = "ner",
    sampled_neg: int = 100,
    *,
    max_neg_type_ratio: int = 1,  # adapted: self.config.max_neg_type_ratio
    max_types: int = 25,  # adapted: self.config.max_types
) -> Tuple[List[Dict[str, int]], List[Dict[int, str]]]:
    if negatives is None:
        negatives = get_negatives(batch_list, sampled_neg=sampled_neg, key=key)
    class_to_ids = []
    id_to_classes = []
    for b in batch_list:
        max_neg_type_ratio = int(max_neg_type_ratio)  # adapted: int(self.config.max_neg_type_ratio)
        neg_type_ratio = random.randint(0, max_neg_type_ratio) if max_neg_type_ratio else 0

        if f"{key}_negatives" in b:  # manually setting negative types
            negs_i = b[f"{key}_negatives"]
        else:  # in-batch negative types
            negs_i = negatives[: len(b[key]) * neg_type_ratio] if neg_type_ratio else []

        if f"{key}_labels" in b:  # labels are predefined
            types = b[f"{key}_labels"]
        else:
            types = list(set([el[-1] for el in b[key]] + negs_i))
            random.shuffle(types)
            types = types[: int(max_types)]  # adapted: self.config.max_types

        class_to_id = {k: v for v, k in enumerate(types, start=1)}
        id_to_class = {k: v for v, k in class_to_id.items()}
        class_to_ids.append(class_to_id)
        id_to_classes.append(id_to_class)

    return class_to_ids, id_to_classes


def get_dict(spans: List[Tuple[int, int, str]], classes_to_id: Dict[str, int]) -> Dict[Tuple[int, int], int]:
    dict_tag = defaultdict(int)
    for span in spans:
        if span[2] in classes_to_id:
            dict_tag[(span[0], span[1])] = classes_to_id[span[2]]
    return dict_tag


def prepare_span_labels(ner, classes_to_id, num_tokens, spans_idx):
    dict_lab = get_dict(ner, classes_to_id) if ner else defaultdict(int)
    if not isinstance(spans_idx, torch.Tensor):
        spans_idx = torch.LongTensor(spans_idx)
    span_label = torch.LongTensor([dict_lab[(s, e)] for s, e in spans_idx.tolist()])
    valid_span_mask = spans_idx[:, 1] > num_tokens - 1
    span_label = span_label.masked_fill(valid_span_mask, -1)
    return span_label, spans_idx


def open_content(path):
    paths = glob.glob(os.path.join(path, "*.json"))
    train, dev, test, labels = None, None, None, None
    for p in paths:
        if "train" in p:
            with open(p, encoding="utf-8") as f:
                train = json.load(f)
        elif "dev" in p:
            with open(p, encoding="utf-8") as f:
                dev = json.load(f)
        elif "test" in p:
            with open(p, encoding="utf-8") as f:
                test = json.load(f)
        elif "labels" in p:
            with open(p, encoding="utf-8") as f:
                labels = json.load(f)
    return train, dev, test, labels


def process(data):
    words = data["sentence"].split()
    entities = []  # List of entities (start, end, type)

    for entity in data["entities"]:
        start_char, end_char = entity["pos"]

        # Initialize variables to keep track of word positions
        start_word = None
        end_word = None

        # Iterate through words and find the word positions
        char_count = 0
        for i, word in enumerate(words):
            word_length = len(word)
            if char_count == start_char:
                start_word = i
            if char_count + word_length == end_char:
                end_word = i
                break
            char_count += word_length + 1  # Add 1 for the space

        # Append the word positions to the list
        entities.append((start_word, end_word, entity["type"].lower()))

    # Create a list of word positions for each entity
    sample = {"tokenized_text": words, "ner": entities}

    return sample


def create_dataset(path):
    train, dev, test, labels = open_content(path)
    train_dataset = []
    dev_dataset = []
    test_dataset = []
    for data in train:
        train_dataset.append(process(data))
    for data in dev:
        dev_dataset.append(process(data))
    for data in test:
        test_dataset.append(process(data))
    labels = [label.lower() for label in labels]
    return train_dataset, dev_dataset, test_dataset, labels


# ------------------------------------------------------------------ how GLiNER reads a row whole
ENT_TOKEN = "<<ENT>>"  # adapted: GLiNERConfig.ent_token
SEP_TOKEN = "<<SEP>>"  # adapted: GLiNERConfig.sep_token


def select_entities(
    i: int,
    entities: Union[Sequence[Sequence[str]], Dict[int, Sequence[str]], Sequence[str]],
    blank: Optional[str] = None,
) -> List[str]:
    if blank is not None:
        return [blank]
    if isinstance(entities, dict):
        return list(entities)
    if entities and isinstance(entities[0], (list, tuple, dict)):  # per-item lists
        return list(entities[i])  # type: ignore[index]
    if entities and isinstance(entities[0], str):  # same for all
        return list(entities)  # type: ignore[list-item]
    return []


def prepare_inputs(
    texts: Sequence[Sequence[str]],
    entities: Union[Sequence[Sequence[str]], Dict[int, Sequence[str]], Sequence[str]],
    blank: Optional[str] = None,
    add_entities: Optional[bool] = True,
    **kwargs,
) -> Tuple[List[List[str]], List[int]]:
    input_texts: List[List[str]] = []
    prompt_lengths: List[int] = []

    for i, text in enumerate(texts):  # adapted: precomputed_prompts_mode (False) left out
        ents = select_entities(i, entities, blank)  # adapted: self._select_entities

        ents = list(ents)  # adapted: self._maybe_remap_entities(ents)
        prompt: List[str] = []
        for ent in ents:
            prompt.append(ENT_TOKEN)  # adapted: self.ent_token
            if add_entities:
                prompt.append(str(ent))

        prompt += []  # adapted: self._extra_prompt_tokens(i, text, ents)

        prompt.append(SEP_TOKEN)  # adapted: self.sep_token
        prompt_lengths.append(len(prompt))
        input_texts.append(prompt + list(text))
    return input_texts, prompt_lengths


def tokenize_inputs(transformer_tokenizer, texts, entities, blank=None, **kwargs):  # adapted: self
    input_texts, prompt_lengths = prepare_inputs(texts, entities, blank=blank, **kwargs)  # adapted: self.prepare_inputs

    tokenized_inputs = transformer_tokenizer(  # adapted: self.transformer_tokenizer
        input_texts,
        is_split_into_words=True,
        return_tensors="pt",
        truncation=True,
        padding="longest",
    )
    words_masks = prepare_word_mask(texts, tokenized_inputs, skip_first_words=prompt_lengths)  # adapted: self.prepare_word_mask
    tokenized_inputs["words_mask"] = torch.tensor(words_masks)

    return tokenized_inputs


def prepare_word_mask(
    texts: Sequence[Sequence[str]],
    tokenized_inputs,
    *,
    skip_first_words: Optional[Sequence[int]] = None,
    token_level: bool = False,
) -> List[List[int]]:
    n = len(texts)

    if skip_first_words is None:
        skip_first_words = [0] * n
    elif len(skip_first_words) != n:
        raise ValueError("skip_first_words must have same length as texts")

    words_masks: List[List[int]] = []

    for i in range(n):
        mask: List[int] = []
        prev_word_id: Optional[int] = None
        seen_words = 0  # counts distinct word_ids we've traversed in this sequence

        for wid in tokenized_inputs.word_ids(i):
            if wid is None:
                # Special tokens (CLS, SEP, PAD, etc.)
                mask.append(0)
            elif wid != prev_word_id or token_level:
                # If we just moved to a new word, update seen_words
                if wid != prev_word_id:
                    seen_words += 1

                if seen_words <= skip_first_words[i]:
                    # This word is in the skip range (e.g., prompt tokens)
                    mask.append(0)
                else:
                    # 1-based word index after skipping
                    mask.append(seen_words - skip_first_words[i])
            else:
                # same word continuation and token_level=False -> mask as 0
                mask.append(0)

            prev_word_id = wid

        words_masks.append(mask)

    return words_masks


def preprocess_example(tokens, ner, classes_to_id, *, max_len=384, max_width=12):  # adapted: self, config
    max_width = max_width  # adapted: self.config.max_width
    num_tokens = len(tokens)
    if num_tokens == 0:
        tokens = ["[PAD]"]
    max_len = max_len  # adapted: self.config.max_len
    if num_tokens > max_len:
        warnings.warn(f"Sentence of length {num_tokens} has been truncated to {max_len}", stacklevel=2)
        tokens = tokens[:max_len]
    num_tokens = len(tokens)
    spans_idx = prepare_span_idx(num_tokens, max_width)

    span_label, spans_idx = prepare_span_labels(ner, classes_to_id, num_tokens, spans_idx)  # adapted: self.

    return {
        "tokens": tokens,
        "span_idx": spans_idx,
        "span_label": span_label,
        "seq_length": num_tokens,
        "entities": ner,
    }


def create_labels(batch, *, max_width=12):  # adapted: self, config
    labels_batch = []
    for i in range(len(batch["tokens"])):
        tokens = batch["tokens"][i]
        classes_to_id = batch["classes_to_id"][i]
        ner = batch["entities"][i]
        num_classes = len(classes_to_id)
        spans_idx = prepare_span_idx(len(tokens), max_width)  # adapted: self.config.max_width
        span_to_index = {(s, e): idx for idx, (s, e) in enumerate(spans_idx.tolist())}
        labels_one_hot = torch.zeros(len(spans_idx), num_classes + 1, dtype=torch.float)
        end_token_idx = len(tokens) - 1
        span_labels_dict = {}
        for start, end, label in ner:
            span = (start, end)
            if label in classes_to_id and span in span_to_index:
                idx = span_to_index[span]
                class_id = classes_to_id[label]
                labels_one_hot[idx, class_id] = 1.0
                span_labels_dict[idx] = label
        valid_span_mask = spans_idx[:, 1] > end_token_idx
        labels_one_hot[valid_span_mask, :] = 0.0
        labels_one_hot = labels_one_hot[:, 1:]
        labels_batch.append(labels_one_hot)
    labels_batch = labels_batch[0].unsqueeze(0)  # adapted: one row at a time (no pad_2d_tensor)
    return labels_batch


def flatten_for_eval(y_true, y_pred):
    all_true = []
    all_pred = []
    for i, (true, pred) in enumerate(zip(y_true, y_pred)):
        all_true.extend([[*t, i] for t in true])
        all_pred.extend([[*p, i] for p in pred])
    return all_true, all_pred


def extract_tp_actual_correct(y_true, y_pred):
    elements_true = defaultdict(set)
    elements_pred = defaultdict(set)
    for type_name, el, idx in y_true:
        elements_true[type_name].add((el, idx))
    for type_name, el, idx in y_pred:
        elements_pred[type_name].add((el, idx))
    target_names = sorted(set(elements_true.keys()) | set(elements_pred.keys()))
    tp_sum = np.array([], dtype=np.int32)
    pred_sum = np.array([], dtype=np.int32)
    true_sum = np.array([], dtype=np.int32)
    for type_name in target_names:
        elements_true_type = elements_true.get(type_name, set())
        elements_pred_type = elements_pred.get(type_name, set())
        tp_sum = np.append(tp_sum, len(elements_true_type & elements_pred_type))
        pred_sum = np.append(pred_sum, len(elements_pred_type))
        true_sum = np.append(true_sum, len(elements_true_type))
    return pred_sum, tp_sum, true_sum, target_names


def _prf_divide(numerator, denominator):
    with np.errstate(divide="ignore", invalid="ignore"):
        result = np.true_divide(numerator, denominator)
        result[denominator == 0] = 0.0
    return result


def compute_prf(y_true, y_pred):
    """`BaseEvaluator.compute_prf(y_true, y_pred, average="micro")`."""
    y_true, y_pred = flatten_for_eval(y_true, y_pred)
    pred_sum, tp_sum, true_sum, _ = extract_tp_actual_correct(y_true, y_pred)
    tp_sum = np.array([tp_sum.sum()])
    pred_sum = np.array([pred_sum.sum()])
    true_sum = np.array([true_sum.sum()])
    precision = _prf_divide(tp_sum, pred_sum)
    recall = _prf_divide(tp_sum, true_sum)
    denominator = precision + recall
    denominator[denominator == 0.0] = 1
    f_score = 2 * (precision * recall) / denominator
    return {"precision": precision[0], "recall": recall[0], "f_score": f_score[0]}


def ner_items(spans):
    """`BaseNEREvaluator.transform_data` for one sentence: (start, end, label) -> [label, (s, e)]."""
    return [[lab, (s, e)] for s, e, lab in spans]
