"""Step-by-step decoding with the Transformer (sec. 6.1 of "Attention Is All
You Need"): the source encoded once, the decoder run one position at a time
with key/value caches, and greedy or beam search over it.

`TransformerGeneration` holds these methods of `kzoo.Transformer`, and
`attention_maps` (the paper's Figures 3-5).
"""

from keras import ops

from kzoo.backend import (
    attention_layout,
    cache_lengths,
    cache_rows,
    check_positions_fit,
    checked_upstream,
    decoder_steps,
    inference_function,
    search_loop,
)
from kzoo.models.backbone import check_id_inputs, missing_token_ids
from kzoo.models.input_checks import check_int
from kzoo.models.transformer.beam_search import beam_search, greedy_search
from kzoo.models.transformer.transformer_inputs import TEXT_HINT

# Sec. 6.1: "maximum output length to input length + 50".
EXTRA_OUTPUT_LENGTH = 50



class TransformerGeneration:
    """`kzoo.Transformer`'s decoding methods (sec. 6.1) and attention maps
    (Figures 3-5), on its `encode`, `embed`, `decoder_layers` and
    `vocabulary_logits`.

    Example:

    >>> import numpy as np
    >>> from kzoo import Transformer
    >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
    ...                     intermediate_dim=16, num_heads=2)
    >>> isinstance(model, TransformerGeneration), tuple(model.generate(np.array([[5, 3]]), max_length=3).shape)
    (True, (1, 3))
    """

    def initial_cache(self, encoder_token_ids, max_length):
        """Encodes the source once and prepares the decoder's key/value caches.

        Args:
            encoder_token_ids: int tensor of shape `(batch, source_length)`. The source ids.
            max_length: int. The number of decoder positions the cache holds.

        Returns:
            A flat dict of tensors, each with leading dimension batch:
            `encoder_padding_mask` `(batch, source_length)` (int32, 1 for real
            tokens); per decoder layer `i`, the encoder-decoder attention's
            keys and values `cross_key_{i}` / `cross_value_{i}`
            `(batch, source_length, h, d_k | d_v)`, computed once, and the
            self-attention caches `self_key_{i}` / `self_value_{i}`
            `(batch, max_length, h, d_k | d_v)`, zeros. On torch the keys and
            values are stored heads first (`kzoo.backend.attention_layout`).

        Example:

        >>> import numpy as np
        >>> from kzoo import Transformer
        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> cache = model.initial_cache(np.array([[5, 6, 3, 0]]), max_length=6)
        >>> sorted(cache)
        ['cross_key_0', 'cross_value_0', 'encoder_padding_mask', 'self_key_0', 'self_value_0']
        >>> tuple(cache["cross_key_0"].shape), tuple(cache["self_key_0"].shape)
        ((1, 4, 2, 4), (1, 6, 2, 4))
        """
        check_positions_fit(0, max_length, self.max_sequence_length, "decoder_token_ids")
        encoder_token_ids = ops.convert_to_tensor(encoder_token_ids, "int32")
        cache = self._traced("_encoder_caches", self._encoder_caches)(encoder_token_ids)
        batch_size = ops.shape(encoder_token_ids)[0]
        for i, layer in enumerate(self.decoder_layers):
            attention = layer.self_attention
            for part, head_dim in (("key", attention.key_dim), ("value", attention.value_dim)):
                cache[f"self_{part}_{i}"] = attention_layout(ops.zeros(
                    (batch_size, max_length, attention.num_heads, head_dim), self.compute_dtype
                ))
        return cache

    def _encoder_caches(self, encoder_token_ids):
        """`initial_cache`'s part read from the source: its padding mask and each
        layer's encoder-decoder keys and values (the source encoded once)."""
        memory = self.encode(encoder_token_ids)
        cache = {"encoder_padding_mask": ops.cast(ops.not_equal(encoder_token_ids, self.padding_id), "int32")}
        for i, layer in enumerate(self.decoder_layers):
            cache[f"cross_key_{i}"], cache[f"cross_value_{i}"] = map(
                attention_layout, layer.cross_attention.compute_key_value(memory)
            )
        return cache

    def _traced(self, name, function):
        """`function` run as `kzoo.backend.decoder_steps` runs it (on torch, traces
        per shape: Keras' per-layer Python was 2/3 of an eager decoder step, and
        the caches of 64 x 16 sources take 9 ms against 17), made once per self;
        not a tracked attribute."""
        calls = self.__dict__.get(name)
        if calls is None:
            calls = self.__dict__[name] = decoder_steps(self, function)
        return calls

    def next_token_logits(self, token_ids, cache, index):
        """One decoder step with the key/value cache: the logits for position
        `index + 1` given the tokens at positions `0 .. index` (sec. 6.1).

        Uses only `keras.ops`, so it runs inside `ops.while_loop` and compiled
        functions on every backend (the signature `kzoo`'s beam and greedy
        search consume).

        Args:
            token_ids: int tensor of shape `(batch,)`. The tokens at position `index`.
            cache: dict. From `initial_cache`, or the previous step.
            index: int or scalar tensor. The position of `token_ids`.

        Returns:
            `(logits, cache)`: float32 `(batch, vocabulary_size)` and the cache
            with this step's self-attention keys and values written at `index`
            (`cache` itself is left as it was).

        Example:

        >>> import numpy as np
        >>> from kzoo import Transformer
        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2, dropout=0.0)
        >>> source = np.array([[5, 6, 3, 0]])
        >>> cache = model.initial_cache(source, max_length=2)
        >>> _, cache = model.next_token_logits(np.array([2]), cache, 0)
        >>> step, cache = model.next_token_logits(np.array([7]), cache, 1)
        >>> full = model({"encoder_token_ids": source, "decoder_token_ids": np.array([[2, 7]])})
        >>> bool(np.allclose(ops.convert_to_numpy(step), ops.convert_to_numpy(full)[:, 1], atol=1e-5))
        True
        """
        x = self.embed(ops.expand_dims(token_ids, 1), "decoder", start_index=index)  # (B, 1, d)
        cache = dict(cache)
        for i, layer in enumerate(self.decoder_layers):
            x, (cache[f"self_key_{i}"], cache[f"self_value_{i}"]) = layer(
                x,
                encoder_padding_mask=cache["encoder_padding_mask"],
                self_attention_cache=(cache[f"self_key_{i}"], cache[f"self_value_{i}"]),
                self_attention_cache_update_index=index,
                cross_attention_cache=(cache[f"cross_key_{i}"], cache[f"cross_value_{i}"]),
            )
        return self.vocabulary_logits(x)[:, 0, :], cache


    def generate(self, encoder_token_ids, beam_size=4, length_penalty=0.6, max_length=None, compiled=True):
        """Translates: beam search with the GNMT length penalty (sec. 6.1: beam
        size 4, α = 0.6, at most input length + 50 tokens, early stop), or
        greedy decoding with `beam_size=1`.

        Args:
            encoder_token_ids: int tensor of shape `(batch, source_length)`. The source ids, 0 for padding.
            beam_size: int. Beams per example; 1 is greedy search. Defaults to `4`.
            length_penalty: float. α of `((5 + |Y|) / 6)^α`. Defaults to `0.6`.
            max_length: int or None. The most tokens generated per example.
                Defaults to `None`: each row's number of non-padding source
                tokens + 50 (sec. 6.1), in a buffer of the padded source length +
                50 (at most `max_sequence_length`, which is the buffer when the
                source length is unknown at trace time).
            compiled: bool. Run the search compiled for the backend
                (`kzoo.backend.inference_function`: XLA on TensorFlow and JAX). `False`
                runs it as plain ops, for an enclosing TensorFlow graph such as a
                SavedModel's (`kzoo.export`), where an XLA function would compile
                again for every new batch size. Defaults to `True`.

        Returns:
            int32 `(batch, max_length)`: the tokens after the start token, the
            end token included, then padding. A source with no token but `[EOS]`
            and padding (an empty sentence, e.g. a blank line of a test set) gives
            the empty translation, `[EOS]` then padding, so that outputs stay
            aligned with inputs; a model trained on real sentences would otherwise
            make words up. An empty batch `(0, source_length)` gives `(0, max_length)`.

        Example:

        >>> import numpy as np
        >>> from kzoo import Transformer
        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> tokens = model.generate(np.array([[5, 6, 3, 0], [7, 3, 0, 0]]), beam_size=2, max_length=5)
        >>> tuple(tokens.shape)  # without max_length: (2, 54), padded source length 4 + 50
        (2, 5)
        """
        self._check_generate_arguments(encoder_token_ids, beam_size, length_penalty, max_length)
        encoder_token_ids = ops.convert_to_tensor(encoder_token_ids, "int32")
        self.check_token_ids(encoder_token_ids, "encoder_token_ids")
        limit_by_source = max_length is None
        if limit_by_source:
            # The output buffer needs a static size: the whole position table
            # when the source length is unknown at trace time (a TensorFlow
            # graph with a `None` length). Each row still stops at its own limit.
            source_length = encoder_token_ids.shape[1]
            buffer_length = self.max_sequence_length if source_length is None else source_length + EXTRA_OUTPUT_LENGTH
            max_length = min(buffer_length, self.max_sequence_length)
        check_positions_fit(0, max_length, self.max_sequence_length, "decoder_token_ids")
        if encoder_token_ids.shape[0] == 0:
            # Nothing to search (and on JAX, `take` from zero rows drops the beams' axes).
            return ops.full((0, max_length), self.padding_id, "int32")
        if not compiled:
            return self._search(encoder_token_ids, beam_size, length_penalty, max_length, limit_by_source)
        search = self.__dict__.get("_inference_search")
        if search is None:  # compiled once per self; not a tracked attribute
            search = inference_function(self, lambda *arguments: self._search(*arguments))
            self.__dict__["_inference_search"] = search
        with checked_upstream():  # the source ids were checked above; the search makes the rest
            return search(encoder_token_ids, beam_size, length_penalty, max_length, limit_by_source)


    def _check_generate_arguments(self, encoder_token_ids, beam_size, length_penalty, max_length):
        """`ValueError`s before any work: ids that are not ids, and search
        arguments that are not what they must be (never rounded or clipped)."""
        if encoder_token_ids is None:
            raise missing_token_ids("encoder_token_ids", "Transformer.generate", TEXT_HINT)
        name = "encoder_token_ids"
        check_id_inputs({name: encoder_token_ids}, {name: self.vocabulary_size}, "Transformer.generate", TEXT_HINT)
        check_int(beam_size, "beam_size", "Transformer.generate", hint="1 is greedy search, 4 the paper's beam.")
        if max_length is not None:
            check_int(max_length, "max_length", "Transformer.generate", hint="None means source length + 50.")
        if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)) or not length_penalty >= 0:
            raise ValueError(
                f"Transformer.generate: length_penalty (GNMT's α) must be a number >= 0; got "
                f"{length_penalty!r}. The paper uses 0.6 (sec. 6.1)."
            )


    def _search(self, encoder_token_ids, beam_size, length_penalty, max_length, limit_by_source):
        """`generate` after its checks: encode once, then search (sec. 6.1); a
        source with no token but [EOS] and padding gives the empty output."""
        length_limits = None
        if limit_by_source:
            source_lengths = ops.sum(ops.cast(ops.not_equal(encoder_token_ids, self.padding_id), "int32"), axis=1)
            length_limits = ops.minimum(source_lengths + EXTRA_OUTPUT_LENGTH, max_length)
        lengths = cache_lengths(max_length)
        cache = self.initial_cache(encoder_token_ids, lengths[0])
        start_ids = ops.full((ops.shape(encoder_token_ids)[0],), self.start_id, "int32")
        search_arguments = dict(
            end_id=self.end_id, padding_id=self.padding_id, max_length=max_length, length_limits=length_limits,
            grow_cache=(self._grow_cache, lengths) if len(lengths) > 1 else None,
        )
        step = self._traced("_decoder_steps", self.next_token_logits)
        with search_loop(step):  # its caches are its own: written in place on torch
            if beam_size == 1:
                tokens = greedy_search(step, cache, start_ids, **search_arguments)
            else:
                tokens = beam_search(
                    step, cache, start_ids,
                    beam_size=beam_size, length_penalty=length_penalty, **search_arguments,
                    reorder_cache=self._cache_reorder(),
                )
        # An empty source (e.g. a blank line of a test set) translates to the empty
        # sentence, so outputs stay aligned with inputs: the model never saw one in training.
        real = ops.logical_and(
            ops.not_equal(encoder_token_ids, self.padding_id), ops.not_equal(encoder_token_ids, self.end_id)
        )
        empty = ops.logical_not(ops.any(real, axis=1))[:, None]  # (batch, 1)
        first = ops.equal(ops.arange(ops.shape(tokens)[1]), 0)[None, :]  # (1, max_length)
        nothing = ops.where(first, self.end_id, self.padding_id)
        return ops.where(empty, ops.cast(nothing, "int32"), tokens)

    @staticmethod
    def _grow_cache(cache, length):
        """`initial_cache`'s caches with the self-attention ones grown to
        `length` slots (zeros: not written yet)."""
        def grown(value):
            more = [(0, 0)] * len(value.shape)
            more[1] = (0, length - value.shape[1])
            return ops.pad(value, more)

        return {key: grown(value) if key.startswith("self_") else value for key, value in cache.items()}

    def _cache_reorder(self):
        """`beam_search`'s `reorder_cache` for `initial_cache`'s caches: the
        encoder's keys and values stay (alike in every beam of a row), of the
        self-attention caches only the slots written so far move (on torch;
        `kzoo.backend.cache_rows`, one per search)."""
        take_rows = cache_rows()

        def reorder(cache, rows, index):
            return {
                key: take_rows(value, rows, index + 1) if key.startswith("self_") else value
                for key, value in cache.items()
            }

        return reorder

    def attention_maps(self, encoder_token_ids, decoder_token_ids):
        """The attention weights of every layer and head (sec. 3.2.3, Figures 3-5).

        Runs the same layers as `Transformer.encode`/`decode` (inference: no
        dropout), asking each attention sublayer for its softmax weights.

        Args:
            encoder_token_ids: int tensor of shape `(batch, source_length)`. The source ids, `padding_id` for padding.
            decoder_token_ids: int tensor of shape `(batch, target_length)`. The decoder's input:
                `start_id`, then the target.

        Returns:
            A dict of three lists with one float tensor per layer:
            `"encoder_self_attention"` `(batch, heads, source_length, source_length)`,
            `"decoder_self_attention"` `(batch, heads, target_length, target_length)`
            and `"cross_attention"` `(batch, heads, target_length, source_length)`.
            Row `i` of a decoder map is the query at input position `i`, which
            predicts target token `i + 1`.

        Example:

        >>> import numpy as np
        >>> from kzoo import Transformer
        >>> model = Transformer(vocabulary_size=20, num_layers=2, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> maps = model.attention_maps(np.array([[5, 6, 3, 0]]), np.array([[2, 7, 8]]))
        >>> [tuple(m[0].shape) for m in maps.values()]
        [(1, 2, 4, 4), (1, 2, 3, 3), (1, 2, 3, 4)]
        """
        self.check_token_ids(encoder_token_ids, "encoder_token_ids")
        self.check_token_ids(decoder_token_ids, "decoder_token_ids")
        source_mask = ops.not_equal(encoder_token_ids, self.padding_id)
        target_mask = ops.not_equal(decoder_token_ids, self.padding_id)
        maps = {"encoder_self_attention": [], "decoder_self_attention": [], "cross_attention": []}
        x = self.embed(encoder_token_ids, "encoder")
        for layer in self.encoder_layers:
            x, scores = layer(x, padding_mask=source_mask, return_attention_scores=True)
            maps["encoder_self_attention"].append(scores)
        memory, y = x, self.embed(decoder_token_ids, "decoder")
        for layer in self.decoder_layers:
            y, scores = layer(
                y, memory, decoder_padding_mask=target_mask, encoder_padding_mask=source_mask,
                return_attention_scores=True,
            )
            maps["decoder_self_attention"].append(scores["self_attention"])
            maps["cross_attention"].append(scores["cross_attention"])
        return maps
