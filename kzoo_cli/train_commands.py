"""The `kzoo` commands that train: finetune (a BERT classifier, BERT sec. 4.1)
and pretrain (masked LM + next sentence prediction, sec. 3.1). Each writes a
preset directory with `training_curves.png` beside the weights, drawn while
it trains."""

import importlib.util
import math
import os

from kzoo_cli.parser import FULL_RATE, LORA_RATE
from kzoo_cli.tables import CommandError, column, file_format, read_table
from kzoo_cli.use_commands import positive, text_column_names
from kzoo_cli.quiet import import_kzoo


def finetune(args):
    """`kzoo finetune PRESET --train FILE --output DIR`."""
    for option in ("epochs", "batch_size", "sequence_length", "accumulate", "lora_rank"):
        if getattr(args, option) is not None:
            positive(f"--{option.replace('_', '-')}", getattr(args, option))
    learning_rate = args.learning_rate or (LORA_RATE if args.lora_rank else FULL_RATE)
    text_columns = text_column_names(args)
    x, labels = _labelled(args.train, args, text_columns)
    class_names = _class_names(args.class_names, labels)
    _check_labels(labels, class_names, args.train)
    validation = None
    if args.validation_split is not None:
        x, labels, validation = _split_off(x, labels, args)
    elif args.validation:
        x_val, y_val = _labelled(args.validation, args, text_columns)
        _check_labels(y_val, class_names, args.validation)
        validation = (x_val, y_val)
    if args.early_stopping is not None:
        positive("--early-stopping", args.early_stopping)
        if validation is None:
            raise CommandError("--early-stopping watches the validation loss: give --validation FILE or "
                               "--validation-split F too.")
    curves_path = _prepare_output(args.output)
    kzoo = import_kzoo()  # after the backend is chosen
    import keras  # noqa: PLC0415

    keras.utils.set_random_seed(args.seed)
    model = kzoo.BertClassifier.from_preset(args.preset, class_names=class_names,
                                            sequence_length=args.sequence_length)
    if args.lora_rank:
        model.enable_lora(args.lora_rank)
    # Optimizer steps, which the warm-up and decay count: one per --accumulate batches.
    steps = math.ceil(args.epochs * math.ceil(len(labels) / args.batch_size) / args.accumulate)
    model.compile(optimizer=kzoo.bert_finetuning_optimizer(
        steps, learning_rate=learning_rate, gradient_accumulation_steps=args.accumulate))
    accumulated = f" of {args.accumulate} x {args.batch_size} examples" if args.accumulate > 1 else ""
    if args.lora_rank:
        trained = sum(math.prod(v.shape) for v in model.trainable_weights)
        accumulated += f", LoRA rank {args.lora_rank} ({trained:,} of {model.count_params():,} parameters train)"
    print(f"fine-tuning {args.preset} on {len(labels):,} examples, {len(class_names)} classes "
          f"({', '.join(class_names[:8])}{', ...' if len(class_names) > 8 else ''}), {steps} steps{accumulated}",
          flush=True)
    callbacks, stopping = [], None
    if args.early_stopping is not None:
        stopping = keras.callbacks.EarlyStopping(patience=args.early_stopping, restore_best_weights=True)
        callbacks = [stopping, kzoo.BestPreset(args.output)]  # the best so far on disk, should the run stop
    history = model.fit(x, labels, batch_size=args.batch_size, epochs=args.epochs, validation_data=validation,
                        **kzoo.progress.fit_progress(curves=_curves(kzoo, curves_path), callbacks=callbacks))
    if stopping is not None:
        losses = history.history["val_loss"]
        print(f"kept epoch {stopping.best_epoch + 1} of {len(losses)} (validation loss "
              f"{losses[stopping.best_epoch]:.4f}, the lowest)")
    if validation is not None:
        results = model.evaluate(*validation, batch_size=args.batch_size, return_dict=True, verbose=0)
        majority = max(validation[1].count(name) for name in class_names) / len(validation[1])
        print(f"validation accuracy {results['accuracy']:.3f} on {len(validation[1]):,} examples "
              f"(majority class: {majority:.3f})")
    model.save_to_preset(args.output)
    print(f"saved the classifier to {args.output}/ (`kzoo predict {args.output} --input FILE`)")
    return 0


def pretrain(args):
    """`kzoo pretrain --corpus GLOB --output DIR`."""
    for option in ("steps", "batch_size", "sequence_length", "dupe_factor", "vocabulary_size"):
        positive(f"--{option.replace('_', '-')}", getattr(args, option))
    curves_path = _prepare_output(args.output)
    kzoo = import_kzoo()
    import keras  # noqa: PLC0415

    keras.utils.set_random_seed(args.seed)
    documents = kzoo.data.read_documents(args.corpus)
    if len(documents) < 2:
        raise CommandError(f"{args.corpus} holds {len(documents)} document(s): next sentence prediction draws "
                           "random sentences from other documents; separate documents with blank lines.")
    print(f"corpus: {len(documents):,} documents, {sum(map(len, documents)):,} sentences", flush=True)
    if args.preset:
        model = kzoo.BertPretrainer.from_preset(args.preset)
        tokenizer = model.tokenizer
    else:
        sentences = [sentence for document in documents for sentence in document]
        tokenizer = kzoo.BertTokenizer(kzoo.learn_wordpiece_vocabulary(sentences, args.vocabulary_size))
        backbone = kzoo.BertBackbone.from_preset(args.architecture, load_weights=False,
                                                 vocabulary_size=tokenizer.vocabulary_size())
        model = kzoo.BertPretrainer(backbone, tokenizer=tokenizer)
    if args.sequence_length > model.backbone.max_sequence_length:
        raise CommandError(f"--sequence-length {args.sequence_length} is longer than the model's position table "
                           f"({model.backbone.max_sequence_length}).")
    model.compile(optimizer=kzoo.bert_pretraining_optimizer(
        total_steps=args.steps, warmup_steps=args.steps // 10, learning_rate=args.learning_rate))
    dataset = kzoo.data.pretraining_dataset(
        documents, tokenizer, args.sequence_length, batch_size=args.batch_size, seed=args.seed,
        dupe_factor=args.dupe_factor, drop_remainder=True,
    )
    print(f"pre-training a {model.count_params():,}-parameter BERT for {args.steps} steps of "
          f"{args.batch_size} x {args.sequence_length} tokens", flush=True)
    history = model.fit(dataset.repeat(), epochs=1, steps_per_epoch=args.steps,
                        **kzoo.progress.fit_progress(curves=_curves(kzoo, curves_path)))
    last = {name: values[-1] for name, values in history.history.items()}
    print("last step: " + ", ".join(f"{name} {value:.3f}" for name, value in sorted(last.items())))
    model.save_to_preset(args.output)
    print(f"saved the pre-trained model to {args.output}/ (`kzoo finetune {args.output} ...`, "
          f"`kzoo fill-mask {args.output} \"... [MASK] ...\"`)")
    return 0


def _labelled(path, args, text_columns):
    """`(x, labels)` of a table: x a list of texts, or a pair of lists."""
    columns, rows = read_table(path, file_format(path, args.input_format))
    texts = [column(columns, rows, name, path) for name in text_columns]
    labels = column(columns, rows, args.label_column, path, kind="label")
    return (texts[0] if len(texts) == 1 else tuple(texts)), labels


def _split_off(x, labels, args):
    """`(x, labels, validation)`: the last --validation-split of the rows held
    out, as Keras' `validation_split` (before shuffling)."""
    fraction = args.validation_split
    if args.validation:
        raise CommandError("Give --validation FILE or --validation-split F, not both.")
    if not 0 < fraction < 1:
        raise CommandError(f"--validation-split must be a fraction between 0 and 1 (the share of the --train "
                           f"rows held out, e.g. 0.1); got {fraction:g}.")
    cut = int(len(labels) * (1 - fraction))
    if cut in (0, len(labels)):
        raise CommandError(f"--validation-split {fraction:g} of {len(labels)} rows leaves none for "
                           f"{'training' if cut == 0 else 'validation'}; give more rows or another fraction.")
    columns = x if isinstance(x, tuple) else (x,)
    train, held = tuple(c[:cut] for c in columns), tuple(c[cut:] for c in columns)
    unpack = (lambda c: c) if isinstance(x, tuple) else (lambda c: c[0])
    return unpack(train), labels[:cut], (unpack(held), labels[cut:])


def _class_names(given, labels):
    if given:
        names = [name.strip() for name in given.split(",")]
        if len(set(names)) != len(names) or not all(names):
            raise CommandError(f"--class-names must be distinct, non-empty names separated by commas; got {given!r}.")
        return names
    names = sorted(set(labels), key=lambda name: (0, int(name), "") if name.isdigit() else (1, 0, name))
    if len(names) < 2:
        raise CommandError(f"The training labels hold one class ({names[0]!r}): a classifier needs two or more.")
    return names


def _check_labels(labels, class_names, path):
    unknown = sorted(set(labels) - set(class_names))
    if unknown:
        raise CommandError(f"{path} has labels that are not among the classes ({', '.join(class_names)}): "
                           f"{', '.join(map(repr, unknown[:5]))}. Add them to --class-names or fix the file.")


def _prepare_output(path):
    """Checks that the output can take a preset (before any work); returns
    where the training curves are drawn."""
    if os.path.exists(path) and not os.path.isdir(path):  # refused before kzoo (and TensorFlow) is imported
        raise CommandError(f"--output {path!r} is a file; give a new or empty directory.")
    from kzoo.presets.directory import PRESET_ENTRIES, TRAINING_CURVES_FILE  # noqa: PLC0415

    foreign = sorted(set(os.listdir(path)) - PRESET_ENTRIES) if os.path.isdir(path) else []
    if foreign:
        raise CommandError(f"--output {path!r} holds {foreign[:5]}, which are not preset files; give a new or "
                           "empty directory (or a preset directory to overwrite).")
    os.makedirs(path, exist_ok=True)
    return os.path.join(path, TRAINING_CURVES_FILE)


def _curves(kzoo, path):
    if importlib.util.find_spec("matplotlib") is None:
        print('(no training_curves.png: matplotlib is not installed; pip install "kzoo[plots]")')
        return None
    return kzoo.visualize.TrainingCurves(path)
