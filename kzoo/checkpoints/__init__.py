"""BERT checkpoints of other formats (the released parameters), read and written.

Importing this package (which `import kzoo` does) registers each format
with `kzoo.presets`, so `from_preset(path)` reads a checkpoint of any of them
and `save_to_preset(path, format="huggingface")` writes one:

| format          | files                                                        | reader                          |
|-----------------|--------------------------------------------------------------|---------------------------------|
| `"google"`      | `bert_config.json`, `bert_model.ckpt.*`, `vocab.txt` (or .zip)| `kzoo.checkpoints.google`       |
| `"huggingface"` | `config.json` (`model_type: bert`), `model.safetensors` or   | `kzoo.checkpoints.huggingface`  |
|                 | `pytorch_model.bin`, `vocab.txt` and/or `tokenizer.json`     |                                 |
| `"keras_hub"`   | KerasHub's `config.json` + `model.weights.h5` + tokenizer    | `kzoo.checkpoints.keras_hub`    |
|                 | (or a `kaggle://` handle, fetched with kagglehub)            | (`kzoo.checkpoints.kaggle`)     |

Each reader opens its format as a `kzoo.checkpoints.source.CheckpointSource`
(a config, a tokenizer config, and named arrays);
`kzoo.checkpoints.bert_weights` is the table that names every kzoo variable
in each format; `kzoo.checkpoints.bert_loading` is the loop that fills a kzoo
model from a source, `kzoo.checkpoints.huggingface_export` the way back, and
`kzoo.checkpoints.convert` the `python -m kzoo.convert` command.

Formats are detected in the order registered below (a directory with both
`bert_config.json` and a Hugging Face `config.json` is google-research's); a
path none of them claims is a kzoo preset directory.
"""

from kzoo.checkpoints import bert_loading, google, huggingface, huggingface_export, keras_hub
from kzoo.presets import register_format

register_format("google", detect=google.detect, load=bert_loading.load)
register_format(
    "huggingface", detect=huggingface.detect, load=bert_loading.load, export=huggingface_export.save_huggingface
)
register_format("keras_hub", detect=keras_hub.detect, load=bert_loading.load)
