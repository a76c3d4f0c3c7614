"""Where a training's time goes, piece by piece: the engine's work for one project, timed.

A seeded random subset of CoNLL-2003 (CoNLL++) training sentences, annotated with their gold
entities, goes through what a Label Studio training of it computes, each piece timed alone
(wall seconds, this process, ``--threads`` torch threads):

* the CRF: its context vectors (the pretrained encoder cut at the middle layer, as shipped; and
  the whole encoder, as before, for comparison), CRFsuite's training over the projected
  features, its marginals for every task (p(gold) and every tag's, what the mix reads);
* one scout's training (the default MiniLM, 3 epochs), its deterministic pass (every word's tag
  distribution: what the served score reads), and the K-candidate work that follows the served
  scores (choosing K of N segmentations per task, and the scouts' pass over them: c/K and the
  training weights);
* a refresh (``backend.jobs.refresh``): the CRF trained again on changed annotations from its kept
  projection, and every task scored again from kept distributions.

Label Studio's side (fetching tasks, writing predictions) is timed by ``benchmarks.scaling``.

    python -m benchmarks.breakdown                         # 1,000 sentences
    python -m benchmarks.breakdown --sentences 60 --out /tmp/bd    # smoke test

Writes ``benchmarks/results/NAME.{json,md}`` (NAME: ``breakdown-SENTENCES``).
"""

from __future__ import annotations

import copy
import sys

import torch
from transformers import AutoModel

from benchmarks.harness import (
    arguments,
    command,
    config,
    document,
    load,
    matmul_gflops,
    report,
    stamp,
    start,
    table,
    timed,
)
from subregweigh.crf import FeatureTagger, context_vectors
from subregweigh.encoder import load_tokenizer
from subregweigh.options import DEFAULT_K, DEFAULT_N_SAMPLES
from subregweigh.scout import Scout, default_model
from subregweigh.weigh import SubRegWeigh


def parse_args(argv=None):
    parser = arguments(__doc__)
    parser.add_argument("--sentences", type=int, default=1000, help="(default: 1000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.name = args.name or f"breakdown-{args.sentences}"
    return args


def whole_encoder_vectors(texts) -> None:
    """The context vectors as computed before the encoder was cut: all 6 layers run, the
    middle one read."""
    tokenizer = load_tokenizer(default_model())
    model = AutoModel.from_pretrained(default_model()).eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    with torch.inference_mode():
        for begin in range(0, len(order), 64):
            batch = [list(texts[i]) for i in order[begin : begin + 64]]
            encoded = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
            model(**encoded, output_hidden_states=True)


def measure(args) -> list[dict]:
    _, examples = load("conll", args.sentences, args.seed)
    texts = [ex.words for ex in examples]
    rows = []

    def row(piece: str, part: str, seconds: float) -> None:
        rows.append({"piece": piece, "part": part, "seconds": round(seconds, 2)})

    context_vectors(texts[:2])  # the encoder loaded: its loading is not the pass's
    _, s = timed(whole_encoder_vectors, texts)
    row("CRF", "context vectors, the whole encoder, float32 (before)", s)
    _, s = timed(context_vectors, texts, precision="float32")
    row("CRF", "context vectors, the encoder cut at its middle layer, float32 (before)", s)
    _, s = timed(context_vectors, texts)
    row("CRF", "context vectors, cut, bfloat16 where the CPU has it (shipped)", s)
    crf = FeatureTagger()
    _, s = timed(crf.fit, examples)  # the vectors again inside: subtracted below
    vectors_s = rows[-1]["seconds"]
    row(
        "CRF",
        f"CRFsuite training, at most {crf.max_iterations} iterations (the fit less its vectors)",
        s - vectors_s,
    )
    converged = copy.copy(crf)
    converged.max_iterations = None
    _, s = timed(converged.refit, examples)
    row("CRF", "CRFsuite training until converged (before; the projection kept)", s)
    _, s = timed(lambda: (crf.gold_proba(examples), crf.label_proba(examples, crf.labels_)))
    row("CRF", "marginals of every task (p(gold) and every tag)", s)

    scout = Scout(random_state=args.seed, progress=False)
    _, s = timed(scout.fit, examples)
    row("scout", f"training, {scout.n_passes_:g} epochs, {scout.n_steps_} steps", s)
    srw = SubRegWeigh.from_parts([scout], crf)
    _, s = timed(srw.scout_proba, examples)
    row("scout", "deterministic pass (every word's tag distribution)", s)
    full = SubRegWeigh.from_parts([scout], crf, k=DEFAULT_K, n_samples=DEFAULT_N_SAMPLES)
    chosen, s = timed(full.candidates, examples)
    row("K candidates", f"choosing K={DEFAULT_K} of N={DEFAULT_N_SAMPLES} segmentations", s)
    full.deterministic = False
    _, s = timed(full.weigh_candidates, examples, *chosen)
    row("K candidates", "the scout's pass over them (c/K)", s)

    kept = srw.scout_proba(examples)
    refreshed, s = timed(srw.refit_crf, examples)
    row("refresh", "the CRF trained again (kept projection)", s)
    _, s = timed(refreshed.weigh_deterministic, examples, scout_proba=kept)
    row("refresh", "every task scored again from kept distributions", s)
    return rows


def markdown(result: dict) -> str:
    rows = result["rows"]
    lines = [
        f"## Where a training's time goes: {result['config']['sentences']:,} CoNLL sentences",
        "",
        "Each piece of the engine's work for one project, timed alone (wall seconds, "
        f"{result['config']['threads'] or 'default'} torch threads). A training of the shipped "
        "defaults is the CRF's pieces, each scout's training and deterministic pass, and the K "
        "candidates after the served scores; a refresh is its two rows. Label Studio's side "
        "(fetching, writing) is in the scaling benchmark.",
        "",
        *table(
            ["piece", "part", "s"],
            [[r["piece"], r["part"], f"{r['seconds']:.2f}"] for r in rows],
            align="llr",
        ),
        "",
        f"Speed check: {result['gflops']:.1f} GFLOP/s (float32 matrix products) at the start.",
    ]
    return document(lines, result)


def main(argv=None) -> int:
    args = parse_args(argv)
    start(args.threads)
    gflops = matmul_gflops()
    rows = measure(args)
    result = {**stamp(command("breakdown", argv)), "config": config(args), "gflops": gflops}
    result["rows"] = rows
    report(args, result, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
