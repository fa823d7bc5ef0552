"""The limit-checked document reader, under the name its first importers used: it lives in
``workbench/documents/text.py``, which knows no scenario (calibration files and imported configs
read through it too)."""
from workbench.documents.text import (  # noqa: F401
    MAX_ALIASES, MAX_BYTES, MAX_DEPTH, MAX_DIGITS, MAX_VALUES, DocumentError, load_text,
    read_text_file,
)
