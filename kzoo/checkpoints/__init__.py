"""Checkpoint file formats, read and written.

Each module opens one format as a `kzoo.models.bert.bert_checkpoints.CheckpointSource`
(a config, a tokenizer config, and named arrays); the name/shape tables and the
loop that assigns the arrays stay with the model in `kzoo.models.bert.bert_checkpoints`.
Backend libraries' file readers (TensorFlow's checkpoint reader, `torch.load`)
are imported here, not in the model code, and only when a checkpoint of their
format is opened: `import kzoo` imports none of these modules.

| module                          | format                                                     |
|---------------------------------|------------------------------------------------------------|
| `kzoo.checkpoints.huggingface`  | Hugging Face directories and `hf://` handles (read, write) |
| `kzoo.checkpoints.google`       | google-research/bert releases (directory or .zip)          |
| `kzoo.checkpoints.keras_hub`    | KerasHub BERT preset directories                           |
"""
