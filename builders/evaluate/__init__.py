"""Evaluation: a model's predictions on the benchmarks scored, and each label's F1 set beside
the Familiarity of what the model learned from (METHOD.md section 9).
"""

from builders.evaluate.evaluation import EvaluateRequest, Evaluation, evaluate

__all__ = ["EvaluateRequest", "Evaluation", "evaluate"]
