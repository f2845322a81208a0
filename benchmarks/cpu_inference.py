"""CPU inference as users run it: one text per call, batches of 32, a corpus
embedded; kzoo on three backends and its exports next to Hugging Face torch
and sentence-transformers.

Run by hand, never in tests:

    python benchmarks/cpu_inference.py --rounds 2
    python benchmarks/cpu_inference.py --contenders kzoo:torch hf:torch --workloads single

The model is all-MiniLM-L6-v2 (the main job's preset): with a fresh 2-way
head for `single` and `batch32` (raw strings in, class probabilities out, at
most 128 tokens), as an embedder for `embed` (mean pooling, normalised, at
most 256 tokens). The texts ship offline: the main job's sentences of the
standard library's docstrings (`single`: 200 of them, one `predict` call
each, after the first 20 as a warm-up, latencies' p50 and p99; `batch32`:
1,024 in one call, the second of two passes timed), and 512 docstring
summaries and whole bodies (`embed`, as benchmarks/embedding_throughput.py).

Contenders, each in its own process, alternating over rounds, with the
threads each library takes by itself (printed):

- `kzoo:tensorflow`, `kzoo:jax`, `kzoo:torch`: `predict` / `encode`.
- `kzoo:onnx`, `kzoo:onnx-int8`: the model exported from TensorFlow
  (`format="onnx"`, `int8=True` for the second), run by onnxruntime, its
  inputs packed by Hugging Face's fast WordPiece tokenizer over the exported
  `vocabulary.txt` (ONNX has no tokenizer); the exported embedder's output is
  pooled and normalised already.
- `kzoo:saved-model`: the classifier's SavedModel (`export()`, the tokenizer
  inside), called with strings (`single` and `batch32` only).
- `hf:torch`: `BertForSequenceClassification` with its fast tokenizer,
  `padding=True`, in `torch.inference_mode` (`single`, `batch32`).
- `st:torch`: `SentenceTransformer.encode` (`embed`).
- `st:onnx-int8`: `SentenceTransformer(..., backend="onnx")` on the model
  `export_dynamic_quantized_onnx_model` writes (onnxruntime's dynamic int8, its
  `avx512_vnni`, `avx512` or `avx2` configuration by the CPU's flags), `encode`
  (`embed`). It needs `optimum[onnxruntime]`, which requires transformers 4
  while kzoo's environment has 5: install it into a directory of its own
  (`pip install --target DIR --no-deps optimum==2.1.0 optimum-onnx==0.1.0
  transformers==4.57.6 huggingface_hub==0.36.2 tokenizers==0.22.2 httpx httpcore`)
  and name it with `--st-onnx-path DIR`, which this contender's process puts first.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import common  # noqa: E402
import embedding_throughput  # noqa: E402
import real_text  # noqa: E402

CONTENDERS = ("kzoo:tensorflow", "kzoo:jax", "kzoo:torch", "kzoo:onnx", "kzoo:onnx-int8", "kzoo:saved-model",
              "hf:torch", "st:torch", "st:onnx-int8")
WORKLOADS = ("single", "batch32", "embed")
SINGLE, WARM_UP = 200, 20


def threads():
    """The threads the process's libraries compute with, as a short string."""
    found = []
    if "torch" in sys.modules:
        found.append(f"torch {sys.modules['torch'].get_num_threads()}")
    if "onnxruntime" in sys.modules:
        found.append("onnxruntime default (one per core)")
    return ", ".join(found) or "the framework's own"


def onnx_functions(int8):
    """(classify(texts), embed(texts)) through kzoo's ONNX exports, run by onnxruntime."""
    import tempfile  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415
    import onnxruntime  # noqa: PLC0415
    import transformers  # noqa: PLC0415

    import kzoo  # noqa: PLC0415

    root = tempfile.mkdtemp()
    classifier = kzoo.BertClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=128)
    classifier.export(os.path.join(root, "classifier"), format="onnx", int8=int8)
    embedder = kzoo.BertTextEmbedder.from_preset("all_minilm_l6_v2", sequence_length=256)
    embedder.export(os.path.join(root, "embedder"), format="onnx", int8=int8)

    def runner(name, length):
        folder = os.path.join(root, name)
        tokenizer = transformers.BertTokenizerFast(os.path.join(folder, "vocabulary.txt"), do_lower_case=True)
        session = onnxruntime.InferenceSession(os.path.join(folder, "model.onnx"), providers=["CPUExecutionProvider"])

        def run(texts):
            packed = tokenizer(texts, padding=True, truncation=True, max_length=length, return_tensors="np")
            return session.run(None, {"token_ids": packed["input_ids"].astype("int32"),
                                      "segment_ids": packed["token_type_ids"].astype("int32"),
                                      "padding_mask": packed["attention_mask"].astype("int32")})[0]

        return run

    classify, embed = runner("classifier", 128), runner("embedder", 256)

    def softmax(logits):
        exp = np.exp(logits - logits.max(-1, keepdims=True))
        return exp / exp.sum(-1, keepdims=True)

    def encode(texts):  # sorted by length as `encode` does, in batches of 32
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = np.concatenate([embed([texts[i] for i in order[s:s + 32]]) for s in range(0, len(texts), 32)])
        return vectors[np.argsort(order)]

    return (lambda texts, batch_size: np.concatenate([softmax(classify(texts[s:s + batch_size]))
                                                      for s in range(0, len(texts), batch_size)])), encode


def st_onnx_int8_encode(corpus):
    """`encode(corpus)` of sentence-transformers' ONNX backend on its dynamically quantized int8 model."""
    import tempfile  # noqa: PLC0415

    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model  # noqa: PLC0415

    flags = open("/proc/cpuinfo").read().split()
    config = "avx512_vnni" if "avx512_vnni" in flags else "avx512" if "avx512f" in flags else "avx2"
    root = tempfile.mkdtemp()
    SentenceTransformer(embedding_throughput.minilm_directory(), backend="onnx", device="cpu").save_pretrained(root)
    export_dynamic_quantized_onnx_model(SentenceTransformer(root, backend="onnx", device="cpu"), config, root)
    model = SentenceTransformer(root, backend="onnx", device="cpu",
                                model_kwargs={"file_name": f"onnx/model_qint8_{config}.onnx"})
    model.max_seq_length = embedding_throughput.LENGTH
    return lambda: model.encode(corpus, batch_size=embedding_throughput.BATCH, convert_to_numpy=True,
                                show_progress_bar=False)


def saved_model_function():
    import tempfile  # noqa: PLC0415

    import tensorflow as tf  # noqa: PLC0415

    import kzoo  # noqa: PLC0415

    path = os.path.join(tempfile.mkdtemp(), "classifier")
    kzoo.BertClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=128).export(path)
    serve = tf.saved_model.load(path).signatures["serving_default"]
    return lambda texts, batch_size: [serve(text=tf.constant(texts[s:s + batch_size]))
                                      for s in range(0, len(texts), batch_size)]


def child(contender, workloads):
    impl, variant = contender.split(":")
    texts = real_text.texts_of("library", "inference")[0]
    corpus = embedding_throughput.texts_of(512)
    predict = embed = None  # predict(texts, batch_size); embed(): the corpus's vectors
    if impl == "kzoo" and variant.startswith("onnx"):
        predict, encode = onnx_functions(int8=variant == "onnx-int8")
        embed = lambda: encode(corpus)  # noqa: E731
    elif variant == "saved-model":
        predict = saved_model_function()
    elif impl in ("kzoo", "hf"):
        predict = (real_text.kzoo_contender if impl == "kzoo" else real_text.hf_contender)("", 2)[0]
        embed = embedding_throughput.kzoo_contender(corpus)[0] if impl == "kzoo" else None
    elif variant == "onnx-int8":  # st
        embed = st_onnx_int8_encode(corpus)
    else:  # st
        embed = embedding_throughput.st_contender(corpus, embedding_throughput.minilm_directory())[0]
    result = {}
    if predict and "single" in workloads:
        latencies = []
        for index, text in enumerate(texts[:WARM_UP + SINGLE]):
            start = time.perf_counter()
            predict([text], 1)
            if index >= WARM_UP:
                latencies.append(time.perf_counter() - start)
        latencies.sort()
        result.update(single_per_s=len(latencies) / sum(latencies), p50_ms=1000 * statistics.median(latencies),
                      p99_ms=1000 * latencies[int(0.99 * (len(latencies) - 1))])
    if predict and "batch32" in workloads:
        for _ in range(2):  # the second pass is timed: every shape compiled in the first
            start = time.perf_counter()
            predict(texts, 32)
            result["batch32_per_s"] = len(texts) / (time.perf_counter() - start)
    if embed and "embed" in workloads:
        result["embed_per_s"] = len(corpus) / embedding_throughput.timed(embed, 2)
    result["threads"] = threads()
    common.report(result)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contenders", nargs="+", help="default: all, st:onnx-int8 with --st-onnx-path only")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--st-onnx-path", help="a directory holding optimum[onnxruntime] for st:onnx-int8 (above)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.workloads)
    args.contenders = args.contenders or [c for c in CONTENDERS if c != "st:onnx-int8" or args.st_onnx_path]
    if "st:onnx-int8" in args.contenders and not args.st_onnx_path:
        parser.error("st:onnx-int8 needs --st-onnx-path DIR, a directory holding optimum[onnxruntime] (see above)")
    print(f"{common.machine_description()}; load average {os.getloadavg()[0]:.2f}; workloads {args.workloads}",
          flush=True)

    def measure(contender):
        impl, backend = contender.split(":")[:2]
        backend = backend if backend in ("tensorflow", "jax", "torch") else ("torch" if impl != "kzoo" else "tensorflow")
        environment = None
        if contender == "st:onnx-int8":  # optimum's transformers 4 first; no TensorFlow models from it
            environment = {"PYTHONPATH": args.st_onnx_path, "USE_TF": "0", "USE_TORCH": "1"}
        result = common.run_child(__file__, backend, ["--child", contender, "--workloads", *args.workloads],
                                  environment)
        print(f"  {contender}: {result}", flush=True)
        return result

    results = common.alternating_rounds(args.contenders, args.rounds, measure)
    keys = [k for k in ("single_per_s", "p50_ms", "p99_ms", "batch32_per_s", "embed_per_s")
            if any(k in r for runs in results.values() for r in runs)]
    references = {"single_per_s": "hf:torch", "batch32_per_s": "hf:torch", "embed_per_s": "st:torch"}

    def median(contender, key):
        values = [r[key] for r in results[contender] if key in r]
        return statistics.median(values) if values else None

    print(f"\nmedians of {args.rounds} rounds; load average now {os.getloadavg()[0]:.2f}")
    print("| contender | " + " | ".join(keys) + " | threads |")
    print("|---" * (len(keys) + 2) + "|")
    for contender in results:
        cells = []
        for key in keys:
            value, reference = median(contender, key), references.get(key)
            base = median(reference, key) if reference in results else None
            ratio = f" ({value / base:.2f}x)" if value is not None and base else ""
            cells.append("-" if value is None else f"{value:.1f}{ratio}")
        print(f"| {contender} | " + " | ".join(cells) + f" | {results[contender][0]['threads']} |")


if __name__ == "__main__":
    main()
