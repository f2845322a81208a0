"""The `kzoo` commands that use models: presets, convert, predict, fill-mask,
attention, translate. Each takes the parsed arguments and returns the exit
status; kzoo (and with it TensorFlow and the backend) is imported only here,
after the backend is chosen."""

import contextlib
import json
import os
import sys
import warnings

from kzoo_cli.tables import CommandError, column, file_format, read_table, write_table, write_text
from kzoo_cli.quiet import import_kzoo

TRANSLATION_MODEL = "transformer_translation.keras"  # what examples/transformer_translation.py saves


def presets(args):
    """`kzoo presets`: the built-in presets as a table."""
    kzoo = import_kzoo()  # after the backend is chosen

    kzoo.presets.print_presets(args.family)
    if args.details:
        print()
        for name, info in kzoo.list_presets(args.family).items():
            print(f"{name}: {info.description}")
    return 0


def convert(args):
    """`kzoo convert SRC DST`: `kzoo.presets.convert`."""
    from kzoo.presets import convert as convert_checkpoint  # noqa: PLC0415

    model = convert_checkpoint(args.source, args.destination, args.format)
    print(f"Wrote a {type(model).__name__} ({model.count_params():,} parameters) to "
          f"{args.destination} ({args.format} format).")
    return 0


def predict(args):
    """`kzoo predict DIR`: class names and probabilities for a table of texts: its
    rows with `predicted_label`, its `probability` and every class's
    (`probability_<class>` columns in CSV, a `probabilities` object in JSON lines)."""
    text_columns = text_column_names(args)
    fmt = file_format(args.input, args.input_format)
    columns, rows = read_table(args.input, fmt)
    texts = [column(columns, rows, name, _shown(args.input)) for name in text_columns]
    output_format = args.output_format or ("jsonl" if args.output.endswith((".jsonl", ".ndjson")) else "csv")
    positive("--batch-size", args.batch_size)
    kzoo = import_kzoo()
    from keras import ops  # noqa: PLC0415

    model = kzoo.BertClassifier.from_preset(args.model)
    x = texts[0] if len(texts) == 1 else tuple(texts)
    with contextlib.redirect_stdout(sys.stderr):  # progress must not mix with the table on stdout
        logits = model.predict(x, batch_size=args.batch_size, **kzoo.progress.predict_progress())
    if model.num_classes == 1:  # a regression head: its value
        results = [{**row, "score": float(value)} for (_, row), value in zip(rows, logits[:, 0])]
        write_table(args.output, output_format, results, [*columns, "score"])
        return 0
    probabilities = ops.convert_to_numpy(ops.softmax(ops.convert_to_tensor(logits, "float32"), axis=-1))
    names = model.class_names or [str(i) for i in range(model.num_classes)]
    results = []
    for (_, row), p in zip(rows, probabilities):
        best = int(p.argmax())
        result = {**row, "predicted_label": names[best], "probability": round(float(p[best]), 6)}
        if output_format == "jsonl":
            result["probabilities"] = {name: round(float(q), 6) for name, q in zip(names, p)}
        else:
            result.update({f"probability_{name}": round(float(q), 6) for name, q in zip(names, p)})
        results.append(result)
    header = [*columns, "predicted_label", "probability", *(f"probability_{name}" for name in names)]
    write_table(args.output, output_format, results, header)
    return 0


def fill_mask(args):
    """`kzoo fill-mask PRESET TEXT...`: the masked LM's candidates for each [MASK]."""
    positive("--top-k", args.top_k)
    kzoo = import_kzoo()  # first: it sets up TensorFlow's logging
    import keras  # noqa: PLC0415
    from kzoo.presets.builtin import is_builtin_name  # noqa: PLC0415

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if not is_builtin_name(args.preset) and kzoo.presets.detect_format(args.preset) == "kzoo":
            model = kzoo.presets.load(keras.Model, args.preset)  # the saved task, heads and all
        else:  # a released BERT (name, Hugging Face, google-research, KerasHub): its MLM head
            model = kzoo.BertMaskedLM.from_preset(args.preset)
    fresh = [str(w.message) for w in caught if "freshly initialised" in str(w.message)]
    if fresh or not hasattr(model, "fill_mask"):
        raise CommandError(
            f"{args.preset} has no trained masked-LM head (it holds a {type(model).__name__}), so its "
            "guesses would be random. fill-mask needs a pre-trained BERT with its MLM head: a released "
            "BERT such as bert_base_uncased, or a directory written by `kzoo pretrain`."
        )
    for warning in caught:  # the others, as they would have been shown
        warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    for text, masks in zip(args.texts, model.fill_mask(args.texts, top_k=args.top_k)):
        if args.json:
            print(json.dumps({"text": text, "masks": [[{"token": t, "probability": round(p, 6)} for t, p in
                                                         candidates] for candidates in masks]},
                             ensure_ascii=False))
            continue
        print(text)
        for number, candidates in enumerate(masks, 1):
            listed = "  ".join(f"{token} {probability:.3f}" for token, probability in candidates)
            print(f"  [MASK] {number}: {listed}")
    return 0


def attention(args):
    """`kzoo attention PRESET TEXT --out FILE`: every attention map, drawn."""
    layers, heads = indices("--layers", args.layers), indices("--heads", args.heads)
    if os.path.splitext(args.out)[1].lower() not in (".png", ".svg", ".pdf"):
        raise CommandError(f"--out {args.out!r}: name the picture .png, .svg or .pdf.")
    kzoo = import_kzoo()

    kzoo.visualize.plot_bert_attention(args.preset, args.text, pair=args.pair, layers=layers, heads=heads,
                                       path=args.out)
    print(f"Wrote the attention maps to {args.out}.")
    return 0


def translate(args):
    """`kzoo translate DIR`: sentences in, translations out (beam search)."""
    model_file = os.path.join(args.model, TRANSLATION_MODEL)
    preprocessor_dir = os.path.join(args.model, "preprocessor")
    if not (os.path.isfile(model_file) and os.path.isdir(preprocessor_dir)):
        raise CommandError(
            f"{args.model!r} is not a saved translation model: it needs {TRANSLATION_MODEL} and preprocessor/ "
            "(what examples/transformer_translation.py --output DIR writes)."
        )
    _, rows = read_table(args.input, "txt")
    sources = [row["text"] for _, row in rows]
    positive("--beam-size", args.beam_size)
    kzoo = import_kzoo()  # first: it sets up TensorFlow's logging
    import keras  # noqa: PLC0415

    model = keras.saving.load_model(model_file)
    preprocessor = kzoo.TransformerPreprocessor.from_preset(preprocessor_dir)
    with contextlib.redirect_stdout(sys.stderr):
        outputs = kzoo.translate(model, preprocessor, sources, batch_size=args.batch_size, progress=True,
                                 beam_size=args.beam_size, length_penalty=args.length_penalty)
    write_text(args.output, "".join(line + "\n" for line in outputs))
    return 0


def text_column_names(args):
    """The text columns of the command line: one, or two for sentence pairs."""
    names = args.text_column or ["text"]
    if len(names) > 2:
        raise CommandError(f"--text-column was given {len(names)} times: once for single texts, twice for pairs.")
    if args.input_format == "txt" or (args.input_format is None and file_format(_input(args)) == "txt"):
        if names != ["text"]:
            raise CommandError("A .txt input holds one text a line and no columns: leave out --text-column, "
                               "or give a .csv, .tsv or .jsonl file.")
    return names


def indices(option, text):
    """`"0,-1"` as `[0, -1]`; None stays None."""
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise CommandError(f"{option} takes integers separated by commas, e.g. 0,-1; got {text!r}.") from None


def positive(option, value):
    if value < 1:
        raise CommandError(f"{option} must be at least 1; got {value}.")


def _input(args):
    return getattr(args, "input", None) or getattr(args, "train", "-")


def _shown(path):
    return "standard input" if path == "-" else path
