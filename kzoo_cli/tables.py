"""Tables of texts in and out of the `kzoo` command: CSV, TSV, JSON lines and
plain text (one text a line), from files or standard input. Standard library
only; every problem is a `CommandError` that names the file, the line and
what to change (the command exits with status 2)."""

import csv
import difflib
import io
import json
import os
import sys
import tempfile

EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".txt": "txt"}


class CommandError(Exception):
    """Bad arguments or input that the user can fix: the `kzoo` command
    prints the message and exits with status 2.

    Example:

    >>> str(CommandError("train.csv has no column 'text'."))
    "train.csv has no column 'text'."
    """


def file_format(path, given=None):
    """The format of `path`: `given`, else its extension's; standard input (`-`) is txt.

    Args:
        path: str. A file path, or "-" for standard input.
        given: str or None. The format named on the command line. Defaults to `None`.

    Returns:
        One of "csv", "tsv", "jsonl", "txt".

    Example:

    >>> file_format("data/train.tsv"), file_format("-"), file_format("x.dat", "csv")
    ('tsv', 'txt', 'csv')
    """
    if given:
        return given
    if path == "-":
        return "txt"
    extension = os.path.splitext(path)[1].lower()
    if extension not in EXTENSIONS:
        raise CommandError(
            f"Cannot tell the format of {path!r} from its extension: name it .csv, .tsv, .jsonl or .txt, "
            "or say --input-format csv|tsv|jsonl|txt."
        )
    return EXTENSIONS[extension]


def read_table(path, fmt):
    """The rows of a file (or of standard input for `-`) as dicts.

    Args:
        path: str. The file, or "-".
        fmt: str. "csv", "tsv" (both with a header line), "jsonl" (a JSON
            object a line) or "txt" (a text a line, column "text").

    Returns:
        `(columns, rows)`: the column names in file order, and a list of
        `(line number, dict)` pairs.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.csv")
    >>> _ = open(path, "w").write("text,label\\ngood film,pos\\n")
    >>> read_table(path, "csv")
    (['text', 'label'], [(2, {'text': 'good film', 'label': 'pos'})])
    """
    text = _read_text(path)
    name = "standard input" if path == "-" else path
    if fmt == "txt":
        rows = [(n, {"text": line}) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        return ["text"], _not_empty(rows, name)
    if fmt == "jsonl":
        return _read_json_lines(text, name)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if fmt == "tsv" else ",",
                        quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL)
    try:
        lines = list(reader)
    except csv.Error as error:
        raise CommandError(f"{name} is not valid {fmt.upper()} (line {reader.line_num}): {error}.") from None
    if not lines or not any(cell.strip() for cell in lines[0]):
        raise CommandError(f"{name} is empty: a {fmt.upper()} file needs a header line naming its columns.")
    header = [cell.strip() for cell in lines[0]]
    rows = []
    for number, cells in enumerate(lines[1:], 2):
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            raise CommandError(
                f"{name}, line {number}: {len(cells)} fields where the header has {len(header)} "
                f"({', '.join(header)}). Quote fields that contain the separator."
            )
        rows.append((number, dict(zip(header, cells))))
    return header, _not_empty(rows, name)


def column(columns, rows, name, path, kind="text", option=None):
    """The values of one column, checked: present in every row, strings, not empty.

    Args:
        columns: list of str. The table's columns (for the message).
        rows: list of `(line number, dict)`. From `read_table`.
        name: str. The column.
        path: str. The file, for messages.
        kind: str. What the column holds, for messages ("text", "label").
            Defaults to `"text"`.
        option: str or None. The option that names the column, for messages.
            Defaults to `None`: `--{kind}-column`.

    Returns:
        A list of str, one per row. Labels may also be JSON integers, given as their digits.

    Example:

    >>> column(["text"], [(2, {"text": "good"})], "text", "train.csv")
    ['good']
    >>> column(["text", "label"], [(2, {"text": "good"})], "txet", "train.csv")
    Traceback (most recent call last):
    ...
    kzoo_cli.tables.CommandError: train.csv has no column 'txet' (its columns: text, label). Did you mean 'text'?
    """
    if name not in columns:
        close = difflib.get_close_matches(name, columns, n=1)
        option = option or f"--{kind}-column"
        hint = f" Did you mean {close[0]!r}?" if close else f" Name the {kind} column with {option}."
        raise CommandError(f"{path} has no column {name!r} (its columns: {', '.join(columns)}).{hint}")
    values = []
    for number, row in rows:
        value = row.get(name)
        if kind == "label" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # a JSON label id: its class name is its digits
        if not isinstance(value, str):
            what = "missing" if value is None else f"a {type(value).__name__} ({value!r}), not a string"
            raise CommandError(f"{path}, line {number}: the {kind} in column {name!r} is {what}.")
        if not value.strip():
            raise CommandError(f"{path}, line {number}: the {kind} in column {name!r} is empty.")
        values.append(value)
    return values


def write_table(path, fmt, rows, columns):
    """Writes dict rows as CSV or JSON lines to a file (whole, or not at all) or standard output.

    Args:
        path: str. The file, or "-" for standard output.
        fmt: str. "csv" or "jsonl".
        rows: list of dict. The rows.
        columns: list of str. The CSV columns, in order.

    Example:

    >>> write_table("-", "csv", [{"label": "pos", "score": 0.9}], ["label", "score"])
    label,score
    pos,0.9
    """
    buffer = io.StringIO(newline="")
    if fmt == "jsonl":
        for row in rows:
            buffer.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    write_text(path, buffer.getvalue())


def write_text(path, text):
    """Writes text to standard output (`-`) or to a file, atomically (a
    temporary file beside it, then renamed): a failed run leaves no half file.

    Example:

    >>> write_text("-", "hello\\n")
    hello
    """
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path, data):
    """Writes bytes to a file atomically (a temporary file beside it, then renamed).

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "vectors.npy")
    >>> write_bytes(path, b"\\x93NUMPY")
    >>> os.path.getsize(path)
    6
    """
    check_writable(path)
    directory = os.path.dirname(os.path.abspath(path))
    handle, scratch = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(scratch, path)
    except BaseException:
        if os.path.exists(scratch):
            os.remove(scratch)
        raise


def check_writable(path, option="--output"):
    """A `CommandError` unless `path` can be written: its directory exists and
    it is not a directory; checked before any work.

    Example:

    >>> check_writable("/no/such/place/out.csv")
    Traceback (most recent call last):
    ...
    kzoo_cli.tables.CommandError: Cannot write '/no/such/place/out.csv': the directory '/no/such/place' does not ...
    """
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CommandError(f"Cannot write {path!r}: the directory {directory!r} does not exist.")
    if os.path.isdir(path):
        raise CommandError(f"{option} {path!r} is a directory; give a file name.")


def _read_text(path):
    if path == "-":
        return sys.stdin.read()
    if os.path.isdir(path):
        raise CommandError(f"{path!r} is a directory; give a file of texts.")
    try:
        with open(path, encoding="utf-8-sig", newline="") as file:
            return file.read()
    except FileNotFoundError:
        raise CommandError(f"No such file: {path!r}.") from None
    except UnicodeDecodeError as error:
        raise CommandError(f"{path} is not UTF-8 text (byte {error.start}): save it as UTF-8.") from None


def _read_json_lines(text, name):
    columns, rows = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise CommandError(f"{name}, line {number}: not JSON ({error.msg}). Write one JSON object a line.") \
                from None
        if not isinstance(row, dict):
            raise CommandError(f"{name}, line {number}: a JSON {type(row).__name__}, not an object "
                               '(write {"text": ..., "label": ...} a line).')
        columns.extend(key for key in row if key not in columns)
        rows.append((number, row))
    return columns, _not_empty(rows, name)


def _not_empty(rows, name):
    if not rows:
        raise CommandError(f"{name} holds no rows: nothing to read.")
    return rows
