"""Build and test helpers that the Makefile (``make test-pythons``, ``make wheel``) runs."""
