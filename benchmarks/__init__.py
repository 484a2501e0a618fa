"""privboard's harness: registry, datasets, suites, runner, result store and CLI."""
