"""What the project publishes (`scenarios.toml`), rebuilt when its inputs change."""
