"""The Hugging Face output format: repo folders, cards, changelogs, plots, export, publishing."""
