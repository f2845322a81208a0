"""The sentence-transformers files beside a Hugging Face BERT directory, read
into `kzoo.BertTextEmbedder`'s arguments and written with it (so that
`SentenceTransformer(directory)` loads it): `modules.json` (Transformer,
Pooling, optional Normalize), `1_Pooling/config.json` (the pooling mode) and
`sentence_bert_config.json` (`max_seq_length`, the preprocessor's `sequence_length`),
`config_sentence_transformers.json` (`prompts`, `default_prompt_name`);
and a `CrossEncoder`'s activation, `kzoo.BertReranker`'s `activation`.
"""

import json
import os

MODULES_FILE = "modules.json"
SETTINGS_FILE = "sentence_bert_config.json"
CONFIG_FILE = "config_sentence_transformers.json"
WRITTEN = (MODULES_FILE, SETTINGS_FILE, CONFIG_FILE, "1_Pooling", "2_Normalize")
# sentence-transformers' older Pooling config: one boolean per mode.
MODE_FLAGS = {
    "pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean", "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken",
}
KNOWN_MODULES = ("Transformer", "Pooling", "Normalize")
# A CrossEncoder's activation_fn (a torch class path) -> kzoo.BertReranker's activation.
ACTIVATIONS = {"torch.nn.modules.activation.Sigmoid": "sigmoid", "torch.nn.modules.linear.Identity": "linear",
               "torch.nn.modules.activation.Tanh": "tanh"}
ACTIVATIONS.update({f"torch.nn.{path.rsplit('.', 1)[-1]}": name for path, name in list(ACTIVATIONS.items())})
EXPORTED_ACTIVATIONS = {name: path for path, name in list(ACTIVATIONS.items())[:3]}


def read(directory):
    """The embedder arguments a sentence-transformers directory fixes (`pooling`, `normalize`,
    `sequence_length`), and `unsupported`: modules kzoo does not build. `{}` without `modules.json`.

    Example:

    >>> import tempfile
    >>> read(tempfile.mkdtemp())  # no modules.json: a plain Hugging Face directory
    {}
    """
    path = os.path.join(directory, MODULES_FILE)
    if not os.path.isfile(path):
        return {}
    modules = _json(path)
    kinds = [module.get("type", "").rsplit(".", 1)[-1] for module in modules]
    found = {"pooling": "mean", "normalize": "Normalize" in kinds}
    unsupported = [kind for kind in kinds if kind not in KNOWN_MODULES]
    if "Pooling" not in kinds:
        unsupported.append("no Pooling module (its output is token states, not one vector per text)")
    if kinds[:1] != ["Transformer"] or any(m.get("path") for m, k in zip(modules, kinds) if k == "Transformer"):
        unsupported.append("a Transformer module that is not the directory itself")
    for module, kind in zip(modules, kinds):
        if kind == "Pooling":
            modes = _pooling_modes(_json(os.path.join(directory, module["path"], "config.json")))
            if len(modes) != 1:
                unsupported.append(f"Pooling with modes {modes}")
            found["pooling"] = modes[0] if modes else "mean"
    found.update(_prompts(directory))
    settings = os.path.join(directory, SETTINGS_FILE)
    length = _json(settings).get("max_seq_length") if os.path.isfile(settings) else None
    if length:
        found["sequence_length"] = int(length)
    if unsupported:
        found["unsupported"] = unsupported
    return found


def _prompts(directory):
    """`prompts` and `default_prompt_name` of `config_sentence_transformers.json`, where set."""
    path = os.path.join(directory, CONFIG_FILE)
    recorded = _json(path) if os.path.isfile(path) else {}
    found = {"prompts": recorded["prompts"]} if recorded.get("prompts") else {}
    if recorded.get("default_prompt_name") is not None:
        found["default_prompt_name"] = recorded["default_prompt_name"]
    return found


def _pooling_modes(config):
    mode = config.get("pooling_mode")
    if mode is not None:
        return [mode] if isinstance(mode, str) else list(mode)
    return [name for flag, name in MODE_FLAGS.items() if config.get(flag)]


def _json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write(embedder, directory):
    """Writes `embedder`'s sentence-transformers files into Hugging Face directory `directory`.

    Example:

    >>> import os, tempfile, kzoo
    >>> write(kzoo.BertTextEmbedder.from_preset("bert_tiny", load_weights=False), path := tempfile.mkdtemp())
    >>> read(path)
    {'pooling': 'mean', 'normalize': True}
    """
    kinds = {"": "Transformer", "1_Pooling": "Pooling", **({"2_Normalize": "Normalize"} if embedder.normalize else {})}
    modules = [{"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
               for i, (path, kind) in enumerate(kinds.items())]
    for path in list(kinds)[1:]:
        os.makedirs(os.path.join(directory, path), exist_ok=True)
    pooling = {"word_embedding_dimension": embedder.backbone.hidden_dim}
    pooling.update({flag: embedder.pooling == name for flag, name in MODE_FLAGS.items()})
    files = {MODULES_FILE: modules, os.path.join("1_Pooling", "config.json"): pooling,
             CONFIG_FILE: {"similarity_fn_name": "cosine", "prompts": embedder.prompts,
                           "default_prompt_name": embedder.default_prompt_name}}
    if embedder.preprocessor is not None:
        files[SETTINGS_FILE] = {"max_seq_length": embedder.preprocessor.sequence_length, "do_lower_case": False}
    for name, content in files.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            json.dump(content, f, indent=2)


def cross_encoder_activation(directory, config):
    """`{"activation": ...}` as a sentence-transformers `CrossEncoder` would take it from Hugging Face
    directory `directory` with `config.json` `config`: v6's `config_sentence_transformers.json`
    (beside a `modules.json`), else v4-v5's `config["sentence_transformers"]["activation_fn"]`, else
    the older `sbert_ce_default_activation_function`; `{}` when none records one (then sigmoid, for
    one label). A path kzoo does not map is kept as it is, for the reranker to refuse by name.

    Example:

    >>> import tempfile
    >>> cross_encoder_activation(tempfile.mkdtemp(), {"sbert_ce_default_activation_function":
    ...                                               "torch.nn.modules.linear.Identity"})
    {'activation': 'linear'}
    """
    path = None
    settings = os.path.join(directory, CONFIG_FILE)
    if os.path.isfile(os.path.join(directory, MODULES_FILE)) and os.path.isfile(settings):
        recorded = _json(settings)
        if recorded.get("model_type") == "CrossEncoder":
            path = recorded.get("activation_fn")
    if path is None:
        path = (config.get("sentence_transformers") or {}).get("activation_fn")
    if path is None:
        path = config.get("sbert_ce_default_activation_function")
    return {} if path is None else {"activation": ACTIVATIONS.get(path, path)}


def cross_encoder_config(reranker):
    """The `sentence_transformers` entry of a `kzoo.BertReranker`'s Hugging Face `config.json`, where
    `CrossEncoder` (v4 and later) reads its activation.

    Example:

    >>> import kzoo
    >>> cross_encoder_config(kzoo.BertReranker.from_preset("bert_tiny", load_weights=False))
    {'activation_fn': 'torch.nn.modules.activation.Sigmoid'}
    """
    return {"activation_fn": EXPORTED_ACTIVATIONS[reranker.activation]}
