"""What every example script shares: `--smoke` runs and progress that a reader can follow.

`--smoke` runs every code path of a script's full run (training, evaluation,
saving, reloading, ...) with tiny sizes, few steps and few shapes to compile
(XLA compiling the quick way, see `parse_arguments`), in half a minute or less
on 2 CPU cores; `tests/run_examples.py` runs each script's smoke mode on every
Keras backend (it is part of CI). A smoke run writes under
`<system temp dir>/kzoo-smoke/<backend>/` unless `--output` says otherwise,
never into the directories a full run fills (`pretrained/`, `finetuned/`).

Progress (`fit_progress`, `Progress`): `kzoo.progress`, which the `kzoo`
command shares.
"""

import os
import tempfile

import keras


def parse_arguments(parser, smoke_defaults, argv=None):
    """`parser.parse_args(argv)` with a `--smoke` flag: when given, the
    arguments' defaults become `smoke_defaults` (flags given explicitly still win)."""
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny run of every code path (half a minute or less; CI runs it), "
                             f"written under {smoke_directory()} unless --output is given")
    if parser.parse_known_args(argv)[0].smoke:
        parser.set_defaults(**smoke_defaults)
    args = parser.parse_args(argv)
    if args.smoke:
        print(f"smoke run ({keras.backend.backend()}): tiny sizes and steps, every code path", flush=True)
        # A few steps of tiny models: XLA (JAX, TensorFlow) spends a smoke run compiling, not running the
        # steps, so it compiles them the quick way: no LLVM optimisations, the classic fusion emitters,
        # one LLVM module (XLA reads the flags at its first compile, not at import, and stops at one it
        # does not know: these are those of the XLA in TensorFlow 2.21 and jaxlib 0.10).
        quick = ("--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false "
                 "--xla_cpu_parallel_codegen_split_count=1")
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {quick}".strip()
    return args


def smoke_directory(*names):
    """`<system temp dir>/kzoo-smoke/<backend>/<names...>`: where smoke runs write
    (`bert_finetuning.py --smoke` fine-tunes what `bert_pretraining.py --smoke`
    saved on the same backend, `serve.py --smoke` serves what it saved)."""
    return os.path.join(tempfile.gettempdir(), "kzoo-smoke", keras.backend.backend(), *names)
