"""Measuring label shift: embeddings, Familiarity, label scores and the one report shape."""
