"""Ways out of kzoo for serving (issue: "Serving"): a TensorFlow SavedModel
with the tokenizer inside the graph, ONNX for the network, and int8 weights.

Each format has its own module; `kzoo.models.Task.export` picks one by name.
"""
