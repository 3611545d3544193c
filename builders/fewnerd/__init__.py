"""Few-NERD INTRA / INTER splits, their repo folders, and N-way K-shot episodes."""
