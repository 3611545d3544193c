"""The command line: `builders` and `build-splits` (entry points in `main`)."""
