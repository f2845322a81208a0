"""A griffe extension for the API reference: docstring examples (`>>>` runs) as code blocks.

kzoo's docstrings follow KerasHub's style: an `Example:` line, then doctest lines at the
docstring's own indentation (run by tests/test_docstrings.py). Markdown would read them as
paragraphs (and `[[1, 2]]` in an output as a link); this wraps each run of doctest lines,
from a `>>>` line to the next blank line, in a ```pycon fence. Docstrings are not changed
on disk, only the text mkdocstrings renders.
"""

import griffe


def fence_doctests(text):
    """Returns `text` with every doctest run wrapped in a ```pycon fence."""
    out, in_fence, in_doctest, indent = [], False, False, ""
    for line in text.splitlines():
        stripped = line.lstrip()
        if in_doctest and not stripped:
            out.append(f"{indent}```")
            in_doctest = False
        elif not in_doctest and stripped.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and not in_doctest and stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}```pycon")
            in_doctest = True
        out.append(line)
    if in_doctest:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fences the doctest runs of every docstring griffe loads."""

    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
