"""The validator's problems as a person reads them on the page: the field's label instead of
its document path, "×" instead of "*", and what was given in words, never a Python repr
(``{'cp': 1, 'dp': 1}`` reads "dp 1, cp 1"; ``''`` reads "the field is empty")."""
from __future__ import annotations

import html
import re

from workbench.errors import Problem
from workbench.glossary import explain

# words for paths no field is bound to
PATH_WORDS = {"parallel": "Layout", "hardware": "Hardware", "model": "Model",
              "training": "Training", "scenario": "Scenario",
              "hardware.gpus_per_node": "GPUs per node", "hardware.nodes": "Nodes",
              "parallel.dp": "Data parallel (dp)"}


def value_words(value) -> str:
    """A given value in words: numbers plainly, text in quotes, a table as "key value"
    pairs, a list joined by commas."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return f"\u201c{text}\u201d"
    if isinstance(value, dict):
        order = ("dp", "tp", "pp", "cp", "ep")
        keys = sorted(value, key=lambda k: (order.index(k) if k in order else 99, str(k)))
        return ", ".join(f"{k} {value_words(value[k]).strip(chr(0x201c) + chr(0x201d))}"
                         for k in keys[:8])
    if isinstance(value, (list, tuple, set)):
        return ", ".join(value_words(v) for v in list(value)[:8])
    return str(value)[:60]


def label_of(path: str, labels: dict[str, str]) -> str:
    return labels.get(path) or PATH_WORDS.get(path) or path.rsplit(".", 1)[-1].replace(
        "_", " ").capitalize()


WORDS = {"micro_batch": "micro-batch", "global_batch": "global batch",
         "seq_len": "sequence length", "kv_heads": "key/value heads",
         "gpus_per_node": "GPUs per node", "ffn_hidden": "FFN width"}
_PATH_IN_TEXT = re.compile(r"\b(?:hardware|model|parallel|training)\.[a-z_.]+[a-z_]")


def problem_words(p: Problem, labels: dict[str, str] | None = None,
                  allowed: list | None = None) -> str:
    """One problem as a sentence: "GPUs per node must be between 1 and 1024 (you typed 0)";
    ``allowed``: the values the page offers for that field, named at the end."""
    labels = labels or {}
    label = label_of(p.path, labels)
    message = _PATH_IN_TEXT.sub(lambda m: label_of(m.group(), labels), p.message)
    message = re.sub(r"(?<=\w)\*(?=\w)", " \u00d7 ", message)
    message = re.sub(r"\b[a-z]+(?:_[a-z]+)+\b",
                     lambda m: WORDS.get(m.group(), m.group().replace("_", " ")), message)
    if p.value == "" and "number" in message:
        kind = "a whole number" if "whole" in message else "a number"
        text = f"{label} is empty: type {kind}"
    elif p.value is None:
        text = f"{label}: {message}"
    else:
        text = f"{label} {message} (you gave {value_words(p.value)})"
    if allowed:
        words = [value_words(a) for a in allowed]
        text += ("; offered: " + (", ".join(words[:-1]) + " or " + words[-1]
                                  if len(words) > 1 else words[0]))
    return text


def tip_html(word: str, shown: str | None = None) -> str:
    """``word`` with its glossary explanation as a tooltip (dotted underline), as HTML."""
    tip = explain(word)
    text = html.escape(shown or word)
    if not tip:
        return text
    return (f"<span class='wb-term' title='{html.escape(tip, quote=True)}' "
            f"style='border-bottom:1px dotted #57606a;cursor:help'>{text}</span>")
