"""`RetrievalEvaluator`: retrieval metrics on a held-out set at the end of each epoch, in the logs."""

import keras

from kzoo.models.retrieval_metrics import checked_ks, evaluate_retrieval, retrieval_inputs


@keras.saving.register_keras_serializable(package="kzoo")
class RetrievalEvaluator(keras.callbacks.Callback):
    """Retrieval metrics of an embedder on held-out queries at the end of each epoch, added to
    the epoch's logs: what sentence-transformers' `InformationRetrievalEvaluator` reports during
    training, with its definitions (`kzoo.retrieval_metrics`), so that `fit`'s history, a
    progress bar and the callbacks after this one see them.

    The queries and the corpus are embedded with the model being trained (or `embedder`),
    scored by cosine similarity and ranked; the logs gain `prefix + "mrr@10"`,
    `prefix + "ndcg@10"`, ... Put this callback before those that read its values
    (`keras.callbacks.EarlyStopping(monitor="val_ndcg@10", mode="max")`, `kzoo.BestPreset`):
    Keras calls callbacks in list order.

    Args:
        queries: dict. Query id -> text (held out from training).
        corpus: dict. Document id -> text.
        relevant_docs: dict. Query id -> set of relevant document ids.
        embedder: `kzoo.BertTextEmbedder` or None. The model to evaluate. Defaults to
            `None`: the model `fit` trains.
        prefix: str. Prepended to each metric's name in the logs. Defaults to `"val_"`.
        batch_size: int. Texts per batch when encoding. Defaults to `32`.
        **ks: tuples of ints, the k's: `accuracy_at_k`, `precision_recall_at_k`, `mrr_at_k`,
            `ndcg_at_k`, `map_at_k`, as `kzoo.retrieval_metrics` (the evaluator's defaults).

    Attributes:
        history: list of dicts. Each epoch's metrics, unprefixed.

    Example:

    >>> from kzoo import BertBackbone, BertTextEmbedder, BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat"]
    >>> embedder = BertTextEmbedder(BertBackbone(vocabulary_size=len(vocabulary), num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16), preprocessor=BertTokenizer(vocabulary))
    >>> evaluator = RetrievalEvaluator({"q": "a cat"}, {"d1": "a cat sat", "d2": "a dog sat"},
    ...                                {"q": {"d1"}}, mrr_at_k=(2,))
    >>> history = embedder.fit((["a cat", "a dog"], ["a cat sat", "a dog sat"]), epochs=2, verbose=0,
    ...                        callbacks=[evaluator])
    >>> len(history.history["val_mrr@2"]), history.history["val_recall@3"]
    (2, [1.0, 1.0])
    """

    def __init__(self, queries, corpus, relevant_docs, embedder=None, prefix="val_", batch_size=32, **ks):
        super().__init__()
        self.queries, self.corpus, self.relevant_docs = queries, corpus, relevant_docs
        self.embedder, self.prefix, self.batch_size, self.ks = embedder, prefix, batch_size, ks
        self.history = []
        retrieval_inputs(queries, corpus, relevant_docs)  # bad inputs fail now, not after an epoch of training
        checked_ks(ks, "RetrievalEvaluator")

    def on_train_begin(self, logs=None):
        model = self._evaluated()
        if not hasattr(model, "encode"):
            raise ValueError(
                f"RetrievalEvaluator embeds texts with the model's `encode` (a kzoo.BertTextEmbedder); "
                f"the model is a {type(model).__name__}. Pass embedder=... to evaluate another model."
            )

    def on_epoch_end(self, epoch, logs=None):
        metrics = evaluate_retrieval(self._evaluated(), self.queries, self.corpus, self.relevant_docs,
                                     self.batch_size, **self.ks)
        self.history.append(metrics)
        if logs is not None:
            logs.update({self.prefix + name: value for name, value in metrics.items()})

    def _evaluated(self):
        return self.model if self.embedder is None else self.embedder

    def get_config(self):
        return {"queries": self.queries, "corpus": self.corpus,
                "relevant_docs": {qid: sorted(documents, key=str) for qid, documents in self.relevant_docs.items()},
                "prefix": self.prefix, "batch_size": self.batch_size, **self.ks}
