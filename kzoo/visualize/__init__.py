"""Pictures of what the models compute and how training went: attention maps
(BERT sec. 5.3; the Transformer paper's Figures 3-5) and training curves.

Drawn with matplotlib (`pip install "kzoo[plots]"`) on figures of their own,
without pyplot's global state or a display: every function returns a
`matplotlib.figure.Figure` (shown inline by Jupyter) and, given `path`, saves
it as PNG, SVG or PDF after the suffix.
"""

from kzoo.visualize.attention import plot_attention, plot_bert_attention, plot_translation_attention
from kzoo.visualize.training_curves import TrainingCurves, plot_history

__all__ = ["TrainingCurves", "plot_attention", "plot_bert_attention", "plot_history", "plot_translation_attention"]
