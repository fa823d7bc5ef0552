"""Human-readable renderings of backend results (text tables for the command line)."""
