"""GLiNER's own evaluator, the reference the toolkit's scores are checked against.

Transcribed from urchade/GLiNER (Apache-2.0), commit c2bb58ddf569480ef7a9de03bef653723a42f5c2:
`gliner/evaluation/utils.py` (`flatten_for_eval`, `extract_tp_actual_correct`, `_prf_divide`
without its warnings) and `gliner/evaluation/evaluator.py` (`BaseEvaluator.compute_prf` with
`average="micro"`, and `BaseNEREvaluator.transform_data`'s `[label, (start, end)]` items).
Only the warnings and the docstrings are left out; the arithmetic is GLiNER's, line for line.
"""

from collections import defaultdict

import numpy as np


def flatten_for_eval(y_true, y_pred):
    all_true = []
    all_pred = []
    for i, (true, pred) in enumerate(zip(y_true, y_pred)):  # noqa: B905 (GLiNER's own line)
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
