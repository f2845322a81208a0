"""Real text in, answers out: raw-string classification and fine-tuning speed,
kzoo on three backends next to Hugging Face torch and KerasHub.

Run by hand, never in tests:

    python benchmarks/real_text.py --corpus library --rounds 3
    python benchmarks/real_text.py --workload finetune --contenders kzoo:torch hf:torch kerashub:torch
    python benchmarks/real_text.py --workload finetune --corpus documents --epochs 3 --contenders \
        kzoo:tensorflow kzoo:jax kzoo:torch hf:torch

The model is all-MiniLM-L6-v2 (the main job's preset, `all_minilm_l6_v2`, 6
layers, hidden 384) with a fresh 2-way head, at most 128 tokens; KerasHub's
has the same architecture with random weights (speed does not depend on
them). The texts ship offline: `library` (sentences of the standard
library's docstrings, the main job's data), `gettext` (the English messages
of the installed programs' message catalogues), `seeds` (paragraphs of the
papers' text under ../shared/seeds, when present). Each contender runs in its
own process, contenders alternate over rounds, and a round's time is the
second of two passes (the first compiles every shape; for fine-tuning the first
epoch's rate is reported too).

- `inference`: raw strings → class probabilities, batch 32 (`predict` on
  all texts) and batch 1 (64 texts, one call each). kzoo: `predict` + softmax
  (`kzoo:B:fixed` packs every text to 128, the old behaviour). Hugging Face:
  its fast tokenizer with `padding=True`, `BertForSequenceClassification` in
  `torch.inference_mode`. KerasHub: `BertTextClassifier.predict` with its
  preprocessor (fixed length 128).
- `finetune`: `--epochs` epochs of raw-text fine-tuning at batch 32 with
  BERT's recipe (AdamW 5e-5, 10% warmup, linear decay) on the main job's
  1,120 training sentences (7 areas) with `--corpus library`, or on 624
  full-length documents of the same areas with `--corpus documents`
  (consecutive docstring sentences of one module, at least 100 words: every
  one fills the 128 tokens, so padding saves nothing), then the 156 held-out
  documents predicted (their accuracy and rate reported).
  kzoo: `fit(texts, labels)`; KerasHub: `fit(texts, labels)`; Hugging Face: a
  torch loop with dynamic padding per shuffled batch (as its Trainer's
  `DataCollatorWithPadding`).

Also reported: the token positions each contender computes next to the real
tokens (kzoo's from its batches, the others' from their padding rule).
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import common  # noqa: E402

LENGTH = 128
CONTENDERS = ("kzoo:tensorflow", "kzoo:jax", "kzoo:torch", "kzoo:torch:fixed", "hf:torch", "kerashub:jax")


def texts_of(corpus, workload):
    """The benchmark's texts, labels, number of classes and held-out
    `(texts, labels)` (or None): for fine-tuning on `library`, the main job's
    1,120 training sentences and their 7 areas; on `documents`, 624
    full-length documents and 156 held out; otherwise 2-way labels
    (alternating)."""
    if corpus in ("library", "documents") and workload == "finetune":
        from offline_corpora import library_area_documents, library_area_task  # noqa: PLC0415

        areas, train, test = library_area_task(160, 96) if corpus == "library" else library_area_documents()
        return *train, len(areas), test if corpus == "documents" else None
    if corpus == "documents":
        raise SystemExit("--corpus documents is a fine-tuning workload: add --workload finetune.")
    if corpus == "library":
        from offline_corpora import library_area_sentences  # noqa: PLC0415

        texts = [sentence for sentence, _, _ in library_area_sentences()][:1024]
    elif corpus == "gettext":
        from message_catalogues import message_catalog_pairs  # noqa: PLC0415

        texts = [source for source, _ in message_catalog_pairs()][:1024]
    else:
        folder = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "seeds")
        paragraphs = []
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), encoding="utf-8") as file:
                paragraphs += [p.strip() for p in file.read().split("\n\n") if len(p.split()) > 3]
        texts = paragraphs[:1024]
    return texts, [i % 2 for i in range(len(texts))], 2, None


def minilm_directory():
    from kzoo.presets import get_preset  # noqa: PLC0415
    from kzoo.presets.released import model_root, weights_directory  # noqa: PLC0415

    return model_root(weights_directory("all_minilm_l6_v2", get_preset("all_minilm_l6_v2")))


def kzoo_contender(option, num_classes, total_steps=1000):
    import keras  # noqa: PLC0415

    import kzoo  # noqa: PLC0415

    padding = "max_length" if option == "fixed" else "longest"
    model = kzoo.BertClassifier.from_preset("all_minilm_l6_v2", num_classes=num_classes, sequence_length=LENGTH)
    model.preprocessor.padding = padding

    def predict(texts, batch_size):
        return keras.ops.convert_to_numpy(keras.ops.softmax(model.predict(texts, batch_size=batch_size, verbose=0)))

    model.compile(optimizer=kzoo.bert_finetuning_optimizer(total_steps=total_steps))

    def finetune(texts, labels):
        model.fit(texts, labels, batch_size=32, epochs=1, verbose=0)

    def positions(texts):
        data = model._prepare(texts)[1]  # the batches predict runs
        return sum(batch[0]["token_ids"].size for batch in data), int(data.lengths.sum())

    return predict, finetune, positions


def hf_contender(option, num_classes, total_steps=1000):
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415

    directory = minilm_directory()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.BertForSequenceClassification.from_pretrained(directory, num_labels=num_classes)

    def encode(texts):
        return tokenizer(texts, padding=True, truncation=True, max_length=LENGTH, return_tensors="pt")

    def predict(texts, batch_size):
        model.eval()
        out = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                out.append(model(**encode(texts[start:start + batch_size])).logits.softmax(-1).numpy())
        return out

    # BERT's recipe, as kzoo's: AdamW 5e-5, warmup over 10% of the steps, then linear decay.
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01, eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, total_steps // 10, total_steps)

    def finetune(texts, labels):
        model.train()
        order = torch.randperm(len(texts)).tolist()
        for start in range(0, len(texts), 32):
            rows = order[start:start + 32]
            batch = encode([texts[i] for i in rows])
            loss = model(**batch, labels=torch.tensor([labels[i] for i in rows])).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()

    def positions(texts):
        lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=LENGTH)["input_ids"]]
        computed = sum(len(lengths[s:s + 32]) * max(lengths[s:s + 32]) for s in range(0, len(lengths), 32))
        return computed, sum(lengths)

    return predict, finetune, positions


def kerashub_contender(option, num_classes, total_steps=1000):
    import keras  # noqa: PLC0415
    import keras_hub  # noqa: PLC0415

    import transformers  # noqa: PLC0415

    vocabulary = transformers.AutoTokenizer.from_pretrained(minilm_directory()).get_vocab()
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=sorted(vocabulary, key=vocabulary.get), lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=LENGTH)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=6, num_heads=12, hidden_dim=384,
        intermediate_dim=1536, max_sequence_length=512,
    )
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=num_classes, preprocessor=preprocessor)

    def predict(texts, batch_size):
        return keras.ops.convert_to_numpy(keras.ops.softmax(model.predict(texts, batch_size=batch_size, verbose=0)))

    model.compile(optimizer=keras.optimizers.AdamW(5e-5), loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True))

    def finetune(texts, labels):
        model.fit(texts, labels, batch_size=32, epochs=1, verbose=0)

    def positions(texts):
        return len(texts) * LENGTH, None

    return predict, finetune, positions


def child(contender, corpus, workload, epochs):
    impl, _, option = (contender.split(":") + [""])[:3]
    texts, labels, num_classes, held_out = texts_of(corpus, workload)
    predict, finetune, positions = {"kzoo": kzoo_contender, "hf": hf_contender,
                                    "kerashub": kerashub_contender}[impl](option, num_classes,
                                                                          epochs * -(-len(texts) // 32))
    computed, real = positions(texts)
    result = {"computed_positions": computed, "real_tokens": real, "texts": len(texts)}
    if workload == "inference":
        for _ in range(2):  # the second pass is timed: every shape compiled in the first
            start = time.perf_counter()
            predict(texts, 32)
            result["batch32_per_s"] = len(texts) / (time.perf_counter() - start)
        singles = texts[:64]
        for _ in range(2):
            start = time.perf_counter()
            for text in singles:
                predict([text], 1)
            result["batch1_per_s"] = len(singles) / (time.perf_counter() - start)
    else:
        rates = []
        for _ in range(epochs):  # the first epoch compiles each shape it meets
            start = time.perf_counter()
            finetune(texts, labels)
            rates.append(len(texts) / (time.perf_counter() - start))
        result["first_epoch_per_s"], result["finetune_per_s"] = rates[0], statistics.median(rates[1:])
        if held_out:
            start = time.perf_counter()
            probabilities = predict(held_out[0], 32)
            probabilities = np.concatenate(probabilities) if isinstance(probabilities, list) else probabilities
            result["predict_per_s"] = len(held_out[0]) / (time.perf_counter() - start)
            result["held_out_accuracy"] = float((probabilities.argmax(-1) == np.asarray(held_out[1])).mean())
    common.report(result)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=("library", "gettext", "seeds", "documents"), default="library")
    parser.add_argument("--epochs", type=int, default=2, help="fine-tuning epochs (the first is reported apart)")
    parser.add_argument("--workload", choices=("inference", "finetune"), default="inference")
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.corpus, args.workload, max(args.epochs, 2))
    print(f"{common.machine_description()}; corpus {args.corpus}, workload {args.workload}", flush=True)

    def measure(contender):
        backend = contender.split(":")[1]
        result = common.run_child(__file__, backend, ["--child", contender, "--corpus", args.corpus,
                                                      "--workload", args.workload, "--epochs", str(args.epochs)])
        print(f"  {contender}: {result}", flush=True)
        return result

    results = common.alternating_rounds(args.contenders, args.rounds, measure)
    keys = ("batch32_per_s", "batch1_per_s") if args.workload == "inference" else ("finetune_per_s", "first_epoch_per_s")
    keys += ("predict_per_s",) if args.corpus == "documents" else ()
    reference = "hf:torch" if "hf:torch" in results else args.contenders[0]
    print(f"\n| contender | {' | '.join(keys)} | ÷ {reference} | positions computed / real tokens |")
    print("|---" * (len(keys) + 3) + "|")
    for contender, runs in results.items():
        medians = [statistics.median(r[k] for r in runs) for k in keys]
        ratios = [m / statistics.median(r[k] for r in results[reference]) for m, k in zip(medians, keys)]
        first = runs[0]
        padding = f"{first['computed_positions'] / first['real_tokens']:.2f}x" if first["real_tokens"] else "-"
        accuracy = [r["held_out_accuracy"] for r in runs if "held_out_accuracy" in r]
        accuracy = f" | held-out accuracy {', '.join(f'{a:.3f}' for a in accuracy)}" if accuracy else ""
        print(f"| {contender} | {' | '.join(f'{m:.1f}' for m in medians)} | "
              f"{' / '.join(f'{r:.2f}x' for r in ratios)} | {padding}{accuracy} |")


if __name__ == "__main__":
    main()
