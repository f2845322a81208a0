"""Fill-mask on raw text: the masked LM's prediction for each `[MASK]` a
person types (BERT sec. 3.1, Task #1), the demo of every pre-trained BERT."""

import numpy as np
from keras import ops

from kzoo.models.bert.bert_preprocessor import BertPreprocessor



class BertFillMask:
    """`fill_mask`, a method of `kzoo.BertPretrainer` and `kzoo.BertMaskedLM`:
    raw text with `[MASK]` in, the masked LM's top-k tokens out.

    Example:

    >>> import kzoo
    >>> issubclass(kzoo.BertMaskedLM, BertFillMask)
    True
    """

    def fill_mask(self, texts, top_k=5):
        """The `top_k` most likely tokens, with probabilities, for each `[MASK]` in the texts.

        The texts are tokenized with `[CLS]`, `[SEP]`, `[MASK]`, `[PAD]` and
        `[UNK]` written in them read as those tokens (the model's tokenizer with
        `special_tokens_in_strings=True`, Hugging Face's default), packed as one
        segment each and run through the masked-LM head at the mask positions
        (sec. 3.1). Probabilities are the softmax over the whole vocabulary.

        Args:
            texts: str or list of str. Text with at least one `[MASK]` each.
            top_k: int. How many candidates per mask. Defaults to `5`.

        Returns:
            For a str: a list with one entry per `[MASK]`, in order, each a list
            of `(token, probability)` pairs, best first. For a list of str: one
            such list per text.

        Example:

        >>> import numpy as np
        >>> import kzoo
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "paris", "is", "nice", "."]
        >>> backbone = kzoo.BertBackbone(vocabulary_size=9, num_layers=1, num_heads=2,
        ...                              hidden_dim=8, intermediate_dim=16)
        >>> model = kzoo.BertMaskedLM(backbone, tokenizer=kzoo.BertTokenizer(vocabulary))
        >>> candidates = model.fill_mask("Paris is [MASK].", top_k=3)
        >>> len(candidates), len(candidates[0])  # one mask, three candidates
        (1, 3)
        >>> token, probability = candidates[0][0]
        >>> token in vocabulary and 0.0 < probability < 1.0
        True
        """
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
            raise ValueError(f"top_k must be a positive int (how many candidates per [MASK]); got {top_k!r}.")
        tokenizer = self._reading_special_tokens()
        mask_id = tokenizer.mask_token_id
        lengths = [int(np.size(tokenizer.tokenize(text))) + 2 for text in texts] if texts else []
        if not texts or max(lengths) > self.backbone.max_sequence_length:
            raise ValueError(
                "fill_mask takes one or more texts, each at most "
                f"{self.backbone.max_sequence_length - 2} tokens long (the model's position table); "
                f"got {len(texts)} text(s) of {max(lengths, default=0) - 2} tokens at most."
            )
        packed = BertPreprocessor(tokenizer, sequence_length=max(lengths))(texts)
        token_ids = ops.convert_to_numpy(packed["token_ids"])
        masks = [np.flatnonzero(row == mask_id) for row in token_ids]
        missing = [i for i, positions in enumerate(masks) if positions.size == 0]
        if missing:
            raise ValueError(
                f"Text {missing[0]} ({texts[missing[0]]!r}) has no [MASK]: write [MASK] where a token "
                "should be predicted, e.g. 'The capital of France is [MASK].'"
            )
        positions = np.zeros((len(texts), max(p.size for p in masks)), "int32")
        for row, mask_positions in enumerate(masks):
            positions[row, : mask_positions.size] = mask_positions
        inputs = {name: ops.convert_to_numpy(value) for name, value in packed.items()}
        logits = self({**inputs, "mask_positions": positions})["mlm_logits"]
        probabilities = ops.convert_to_numpy(ops.softmax(ops.cast(logits, "float32"), axis=-1))
        top_k = min(top_k, probabilities.shape[-1])
        results = []
        for row, mask_positions in enumerate(masks):
            per_mask = []
            for m in range(mask_positions.size):
                best = np.argsort(-probabilities[row, m], kind="stable")[:top_k]
                per_mask.append([(tokenizer.id_to_token(i), float(probabilities[row, m, i])) for i in best])
            results.append(per_mask)
        return results[0] if single else results


    def _reading_special_tokens(self):
        """The self's tokenizer with `special_tokens_in_strings=True` (built once)."""
        tokenizer = getattr(self, "tokenizer", None)
        if tokenizer is None:
            raise ValueError(
                f"fill_mask needs the model's tokenizer to read text, and this {type(self).__name__} has "
                f"none: build it with tokenizer=kzoo.BertTokenizer(vocabulary), or load it with "
                f"kzoo.{type(self).__name__}.from_preset(...) from a preset that has one."
            )
        if tokenizer.special_tokens_in_strings:
            return tokenizer
        cached = self.__dict__.get("_fill_mask_tokenizer")
        if cached is None or cached[0] is not tokenizer:  # not a tracked attribute
            reader = type(tokenizer).from_config({**tokenizer.get_config(), "special_tokens_in_strings": True})
            cached = (tokenizer, reader)
            self.__dict__["_fill_mask_tokenizer"] = cached
        return cached[1]
