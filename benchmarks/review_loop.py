"""The review loop as a detector: how many REAL errors a reviewer finds for the sentences read.

A reviewer works through CoNLL-2003 test (as annotated) in rounds of ``--batch`` sentences, the
most doubtful first, and decides each against CoNLL++: an erroneous sentence is fixed, a correct
one confirmed. Reported: the share of the errors found after reviewing as many sentences as there
are errors (x1) and twice as many (x2), the curve of errors found against sentences reviewed, and
each round's cost, for:

* ``static``: the scout's ranking (the served default: the soft minimum over words of the
  deterministic p(gold), ``--softmin-temperature``), read top down;
* ``propagate``: after each round, every unreviewed sentence that annotates a convention as a
  fixed sentence's original annotation did, in the spans the fix changed, has its score
  multiplied by ``--boost`` per the slip's weight (the product's served score,
  ``subregweigh.served.served_score``): the same convention slip elsewhere moves up
  (from ``--propagate-after`` sentences read). A convention (``--slip-keys``): ``entity``, the
  product's, an entity's words and type, or a capitalised word outside the entities
  (``subregweigh.review.slip_keys``); ``word``, each word of the changed spans with its type
  (:mod:`benchmarks.word_slips`, the product's before 2026-11-29). The weight
  (``--propagate-rule``): ``net``, the product's, the fixes of that slip less the sentences
  read that held it unchanged (``subregweigh.review.net_slips``); ``count``, the fixes alone;
* ``learn``: after each round, :class:`benchmarks.review_ranker.ReviewRanker` fits a logistic
  regression on the decided sentences (the scout's doubt, the sentence's shape, how the scout's
  own tagging disagrees with the annotation, by kind and type pair, and the slips of the fixed
  sentences it repeats) and ranks the rest by it;
* ``refit-crf``: every ``--refit-every`` rounds (default: each), until ``--refit-until``
  sentences are read, the CRF alone (``FeatureTagger.refit``, seconds) trains again on the
  annotations as they stand, the fixes included and each sentence read counted
  ``--refit-weight`` times, beside the same scouts' kept p(gold): a fixed
  convention reaches the CRF's p(gold) of the sentences that share it (the backend's refresh
  after a batch of decisions, ``backend.jobs.refresh``); ``propagate+refit-crf``: both, what the
  backend serves;
* ``retrain`` (``--policies``, off by default: it trains a scout per retraining): every
  ``--retrain-every`` rounds, until twice as many sentences as there are errors are read, a
  fresh scout of the seed (``--ensemble`` of them, as the backend trains them; and a fresh
  CRF) trains on the annotations as they stand, the fixes
  included (what the backend's next training does), and its scores rank the rest;
  ``--retrain-weight`` counts each reviewed sentence more in that retraining (a lab option:
  the backend's training weighs every annotation alike);
  ``propagate+retrain``: both; ``propagate+refit-crf+retrain``: the three, the backend's
  refresh after each batch and its retrain every ``--retrain-every`` rounds (the refreshes
  after a retrain mix with the retrained scout's p(gold)).

* ``copies`` (``propagate+copies``, ``propagate+refit-crf+copies``: the latter is what the
  backend serves since issue 61): after each round, every sentence is also multiplied by
  ``--boost`` (or ``--copies-boost``, a lab option) per decided copy that labels it otherwise:
  a sentence read (confirmed, or fixed to its correction) of the same text, or annotating one
  of its entity strings with another type (:func:`subregweigh.copies.contradicted`,
  ``backend.review.copies``).

``--data``: CoNLL-2003 test against CoNLL++ (``conllpp``, the default) or the tweets' crowd
annotations of slot 0 or 1 against the experts (``tweets-0``, ``tweets-1``,
:func:`benchmarks.real_errors.load_pair`).

With ``--crf`` (the default, as the product), every score's p(gold) is the scout's and the
CRF's half and half (``SubRegWeigh(crf=True)``); ``--no-crf``: the scout's alone. The first
three policies retrain nothing: a round costs milliseconds. One scout per seed
(``random_state=s``) on the run's sentences (``--size``: ``all`` or a seeded subsample), as the
real-error benchmark trains it.

    python -m benchmarks.review_loop --size 1000          # 3 seeds
    python -m benchmarks.review_loop --size all --cache /tmp/review-loop

``--cache DIR`` keeps each seed's scout outputs (per word: p(gold) and the scout's tag), so a
rerun with other policies or rounds trains nothing.

Smoke test: ``python -m benchmarks.review_loop --size 80 --seeds 1 --epochs 1 --batch 5 --out
/tmp/loop``.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import numpy as np

from benchmarks import harness, word_slips
from benchmarks.baselines import consistency_scores
from benchmarks.real_errors import DATA_SETS, add_scout_arguments, draw, load_pair, scout
from benchmarks.review_ranker import ReviewRanker, sentence_features, slip_counts
from subregweigh import copies as copy_links
from subregweigh import review as entity_slips
from subregweigh.crf import FeatureTagger, mix_gold
from subregweigh.options import SOFTMIN_TEMPERATURE
from subregweigh.review import REVIEWED_WEIGHT, net_slips, tally_decisions
from subregweigh.served import SLIP_BOOST, served_score
from subregweigh.tags import entity_spans

NAME = "review_loop"
POLICIES = (
    "static",
    "propagate",
    "learn",
    "refit-crf",
    "propagate+refit-crf",
    "retrain",
    "propagate+retrain",
    "propagate+refit-crf+retrain",
    "propagate+copies",
    "propagate+refit-crf+copies",
)
CHEAP = POLICIES[:5]  # no scout retrained: the default


def parse_args(argv=None):
    parser = harness.arguments(__doc__, name=None)
    parser.add_argument("--size", default="1000", help="'all' or a sentence count (default 1000)")
    parser.add_argument("--seeds", type=int, default=harness.SEEDS, help="(default: 3)")
    add_scout_arguments(parser)
    parser.add_argument("--batch", type=int, default=50, help="sentences a round (default: 50)")
    parser.add_argument(
        "--boost",
        type=float,
        default=SLIP_BOOST,
        help=f"(default: {SLIP_BOOST}, the product's: subregweigh.served.SLIP_BOOST)",
    )
    parser.add_argument(
        "--copies-boost",
        type=float,
        default=None,
        help="copies: the factor per decided copy against (default: --boost, the product's)",
    )
    parser.add_argument(
        "--data",
        choices=DATA_SETS,
        default="conllpp",
        help="the real errors: CoNLL-2003 test against CoNLL++ (default) or the tweets' crowd "
        "slot 0 or 1 against the experts",
    )
    parser.add_argument(
        "--propagate-rule",
        choices=("net", "count"),
        default="net",
        help="propagate: a slip's weight, the fixes less the sentences read that held it "
        "unchanged (net, the product's) or the fixes alone (count) (default: net)",
    )
    parser.add_argument(
        "--slip-keys",
        choices=("entity", "word"),
        default="entity",
        help="propagate: what a slip is, a whole entity (its words and type) or a capitalised "
        "word outside the entities (entity, the product's), or each word of the changed spans "
        "with its type (word) (default: entity)",
    )
    parser.add_argument(
        "--sink",
        type=float,
        help="propagate, a lab option: a sentence whose most doubted (word, type) pair the "
        "sentences read held unchanged, and no fix changed, has its doubt (1 - score) "
        "multiplied by this per such sentence; the pair is of the latest scoring, as a refresh "
        "or a retrain leaves it (default: none)",
    )
    parser.add_argument(
        "--propagate-after",
        type=int,
        default=0,
        help="propagate: the boosts rank only once this many sentences are read (they are "
        "counted from the start; default: 0)",
    )
    parser.add_argument(
        "--ensemble", type=int, default=1, help="scouts whose p(gold) is averaged (default: 1)"
    )
    parser.add_argument(
        "--softmin-temperature",
        type=float,
        default=SOFTMIN_TEMPERATURE,
        help=f"the served score's (default: {SOFTMIN_TEMPERATURE}; 0: the lowest part)",
    )
    parser.add_argument(
        "--ranker-c", type=float, default=ReviewRanker().C, help="learn: ReviewRanker's C"
    )
    parser.add_argument(
        "--policies",
        nargs="+",
        choices=POLICIES,
        default=list(CHEAP),
        help=f"(default: {' '.join(CHEAP)}; the retrain ones train a scout per retraining)",
    )
    parser.add_argument(
        "--retrain-every", type=int, default=2, help="retrain: rounds between (default: 2)"
    )
    parser.add_argument(
        "--retrain-until",
        type=int,
        help="retrain: no more once this many sentences are read (default: twice the errors)",
    )
    parser.add_argument(
        "--retrain-weight",
        type=float,
        default=1.0,
        help="retrain: each reviewed sentence's loss weight in the retrained scouts (and its "
        "count in their CRF, as --refit-weight) (default: 1, as the backend's training)",
    )
    parser.add_argument(
        "--refit-every",
        type=int,
        default=1,
        help="refit-crf: rounds between refits (default: 1, the product's refresh after every "
        "batch of decisions)",
    )
    parser.add_argument(
        "--refit-until",
        type=int,
        help="refit-crf: no more once this many sentences are read (default: five times the "
        "errors; the x1 and x2 columns are read long before)",
    )
    parser.add_argument(
        "--refit-weight",
        type=int,
        default=REVIEWED_WEIGHT,
        help="refit-crf: how many times each reviewed sentence counts in the CRF's refit "
        f"(default: {REVIEWED_WEIGHT}, subregweigh.review.REVIEWED_WEIGHT, the backend "
        "refresh's; 1: as any other annotation)",
    )
    parser.add_argument(
        "--refit-share",
        type=float,
        help="refit-crf: the refitted CRF's share beside the scouts (default: the CRF's share)",
    )
    parser.add_argument(
        "--refit-iterations",
        type=int,
        help="refit-crf: the refit's L-BFGS iterations, 0: until CRFsuite's convergence test "
        "stops it (default: the CRF's, as the backend's refresh)",
    )
    parser.add_argument(
        "--crf-iterations",
        type=int,
        help="the CRF's L-BFGS iterations (default: the product's FeatureTagger's)",
    )
    parser.add_argument(
        "--crf-context-dims",
        type=int,
        help="the CRF's context components (default: the product's FeatureTagger's)",
    )
    parser.add_argument("--cache", type=Path, help="folder for the scouts' outputs (default: none)")
    parser.add_argument(
        "--resume", action="store_true", help="keep the seeds a stopped run of --name finished"
    )
    args = parser.parse_args(argv)
    args.max_steps = None
    args.name = args.name or f"review-loop-{args.size}" + (
        f"-ensemble{args.ensemble}" if args.ensemble > 1 else ""
    )
    return args


def review(quality, flags, original, corrected, batch: int, policy: str, **kw) -> list[dict]:
    """Rounds of ``batch`` until every sentence is read; per round the sentences read, the errors
    found so far and the seconds the rescoring took. ``policy``: ``static``, ``propagate``,
    ``learn``, ``retrain`` or ``propagate+retrain``. ``kw``: ``boost``, ``slip_keys`` and
    ``propagate_rule`` (:func:`slip_weights`): propagate; ``X`` (the
    :func:`sentence_features` of ``original``) and ``C`` (:class:`ReviewRanker`'s): learn;
    ``rescore`` (the annotations as they stand -> a new quality per sentence),
    ``retrain_every`` and ``retrain_until`` (:func:`retrain_due`): retrain; ``refit``
    (the same, by a refitted CRF): refit-crf; ``sink`` and ``doubted`` (-> each sentence's
    most doubted pair as the latest scoring has it, :func:`most_doubted`): ``--sink``."""
    static = np.asarray(quality, dtype=float)
    repeats = np.zeros(len(static))  # each sentence's repeats of the fixed slips (propagate)
    against = np.zeros(len(static))  # each sentence's decided copies labelling it otherwise
    boost = kw.get("boost", SLIP_BOOST)
    doubt = -static
    n = len(static)
    reviewed = np.zeros(n, dtype=bool)
    fixes: list = []
    read_pairs: list = []  # (convention pairs, slips) of each sentence read
    sunk = np.zeros(n)  # sink: confirmations of each sentence's most doubted pair
    rounds = []
    while not reviewed.all():
        open_ = np.flatnonzero(~reviewed)
        picked = open_[np.argsort(-doubt[open_], kind="stable")[:batch]]
        reviewed[picked] = True
        began = time.perf_counter()
        fixed_now = [(int(i), corrected[i]) for i in picked[flags[picked]]]
        fixes += fixed_now
        if "propagate" in policy:  # the same slip elsewhere moves up
            keyed = word_slips if kw.get("slip_keys") == "word" else entity_slips
            slips = {i: keyed.slip_keys(original[i], fixed) for i, fixed in fixed_now}
            for i in picked:
                ex = original[i]
                pairs = keyed.convention_pairs(ex.words, ex.label)
                read_pairs.append((pairs, slips.get(int(i), ())))
            weights = slip_weights(read_pairs, kw.get("propagate_rule", "net"))
            repeats = np.array(
                [keyed.slip_repeats(ex.words, ex.label, weights) for ex in original], dtype=float
            )
        retrain = "retrain" in policy and retrain_due(len(rounds) + 1, reviewed.sum(), kw)
        refit = "refit-crf" in policy and refit_due(len(rounds) + 1, reviewed.sum(), kw)
        if retrain or refit:
            # as the backend's next training or refresh: every annotation as it stands, fixes
            # included
            now = list(original)
            for i, fixed in fixes:
                now[i] = fixed
            static = np.asarray(
                (kw["rescore"] if retrain else kw["refit"])(now, np.flatnonzero(reviewed)),
                dtype=float,
            )
        if "copies" in policy:  # a decided copy that labels a sentence otherwise moves it up
            against = copies_against(original, fixes, reviewed, flags)
        if "propagate" in policy and kw.get("sink") is not None:
            sunk = confirmed_doubts(read_pairs, kw["doubted"]())
        if policy == "learn":
            slips, decided = slip_counts(original, fixes), np.flatnonzero(reviewed)
            ranker = ReviewRanker(C=kw["C"]).fit(kw["X"], slips, decided, flags[decided])
            doubt = ranker.doubt(kw["X"], slips, static)
        elif reviewed.sum() >= kw.get("propagate_after", 0):
            # the product's served score (-quality < 0: toward 0 is up)
            doubt = -copies_served(static, repeats, against, boost, kw.get("copies_boost"))
            if kw.get("sink") is not None:  # confirmed doubts sink
                sunken = 1 - (1 - static) * kw["sink"] ** sunk
                doubt = -served_score(sunken, repeats, boost=boost)
        else:  # the repeats are kept, not applied yet
            doubt = -static
        rounds.append(
            {
                "reviewed": int(reviewed.sum()),
                "found": int(flags[reviewed].sum()),
                "seconds": time.perf_counter() - began,
                "read": flags[picked].tolist(),  # in the order read: counts end mid-round
            }
        )
    return rounds


def copies_against(original, fixes, reviewed, flags) -> np.ndarray:
    """Shape (n,): per sentence, the decided copies (a sentence read: confirmed, or fixed to
    its correction) that label it otherwise, as the backend counts them
    (:func:`subregweigh.copies.contradicted` over the annotations as they stand, the same text
    or an entity string)."""
    now = list(original)
    for i, fixed in fixes:
        now[i] = fixed
    labelled = [
        copy_links.Labelled(str(i), tuple(ex.words), (tuple(ex.label),)) for i, ex in enumerate(now)
    ]
    decided = {
        str(i): copy_links.FIXED if flags[i] else copy_links.CONFIRMED
        for i in np.flatnonzero(reviewed)
    }
    counts = copy_links.contradicted(copy_links.find_copies(labelled, "ner"), decided)
    return np.array([counts.get(str(i), 0) for i in range(len(now))], dtype=float)


def copies_served(static, repeats, against, boost: float, copies_boost: float | None):
    """The served quality: the product's (:func:`subregweigh.served.served_score`: halved per
    repeat of a fixed slip and per decided copy against, both at ``boost``), or with
    ``copies_boost`` (``--copies-boost``, a lab option) per copy instead."""
    if copies_boost is None:
        return served_score(static, repeats, boost=boost, contradicted=against)
    return served_score(static * copies_boost**against, repeats, boost=boost)


def slip_weights(decided, rule: str) -> Counter:
    """Each fixed slip's weight after the sentences ``decided`` ((convention pairs, slips) per
    sentence read): ``net``, the product's (:func:`subregweigh.review.net_slips`: the fixes
    less the sentences read that held the pair unchanged); ``count``, the fixes alone (the
    product's before 2026-11-29)."""
    if rule == "net":
        return net_slips(decided)
    return Counter(pair for _, slips in decided for pair in slips)


def confirmed_doubts(read_pairs, doubted) -> np.ndarray:
    """Per sentence, how often the sentences read held its most doubted (word, type) pair
    (``doubted``) unchanged, where no fix has changed that pair: 0 once one has (``--sink``)."""
    fixes, held = tally_decisions(read_pairs)
    return np.array([0 if fixes[pair] else held[pair] for pair in doubted], dtype=float)


def most_doubted(examples, gold, slip_keys: str = "entity") -> list[tuple[str, str]]:
    """Per sentence, the convention (``--slip-keys``) of its word of lowest p(gold): the
    entity holding it (its words and type) or the word with O; with ``word``, the word and its
    type."""
    out = []
    for ex, g in zip(examples, gold, strict=True):
        j = int(np.argmin(g))
        out.append(word_type(ex.words, ex.label, j, whole=slip_keys == "entity"))
    return out


def word_type(words, tags, j: int, whole: bool) -> tuple[str, str]:
    """Word ``j``'s convention: its entity's words and type (``whole``, where it is inside
    one), else the word and its type or O."""
    if whole:
        for kind, start, end in entity_spans(tags):
            if start <= j < end:
                return " ".join(words[start:end]), kind
    return words[j], tags[j].split("-", 1)[-1]


def retrain_due(n_rounds: int, n_reviewed: int, kw) -> bool:
    """Whether the scout retrains after round ``n_rounds``: every ``retrain_every`` rounds,
    while fewer than ``retrain_until`` sentences are read."""
    return n_rounds % kw["retrain_every"] == 0 and n_reviewed < kw["retrain_until"]


def refit_due(n_rounds: int, n_reviewed: int, kw) -> bool:
    """Whether the CRF refits after round ``n_rounds`` (refit-crf): every ``refit_every``
    rounds (the product: after every batch of decisions), while fewer than ``refit_until``
    sentences are read."""
    return n_rounds % kw["refit_every"] == 0 and n_reviewed < kw["refit_until"]


def reviewed_weights(n: int, reviewed, weight: float) -> np.ndarray | None:
    """The retrained scouts' loss weights, shape (n,): ``weight`` for the ``reviewed``
    sentences' indices, 1 for the rest; None (no weights) when ``weight`` is 1."""
    if weight == 1:
        return None
    out = np.ones(n)
    out[np.asarray(reviewed, dtype=int)] = weight
    return out


def reads_to_find(rounds, n_found: float) -> int:
    """How many sentences were read when the ``n_found``-th error was, counted within its round
    (a round is read in its order)."""
    before, found = 0, 0
    for r in rounds:
        if r["found"] >= n_found:
            for j, flag in enumerate(r["read"], 1):
                found += flag
                if found >= n_found:
                    return before + j
        before, found = r["reviewed"], r["found"]
    raise ValueError(f"fewer than {n_found} errors found")


def found_after(rounds, n_reviewed: int) -> int:
    """Errors among the first ``n_reviewed`` sentences read, counted within the round that
    holds the ``n_reviewed``-th (a round is read in its order; before 2026-11-29 the whole
    round counted, up to a round's length more sentences read)."""
    before, found = 0, 0
    for r in rounds:
        if r["reviewed"] >= n_reviewed:
            return found + sum(r["read"][: n_reviewed - before])
        before, found = r["reviewed"], r["found"]
    return found


def cache_file(args, seed: int, member: int = 0) -> Path:
    """Where ``--cache`` keeps the outputs of a scout of these settings (``args``: size,
    epochs, model, precision, learning rate; ``member``: which scout of an ensemble)."""
    data = getattr(args, "data", "conllpp")
    key = ("" if data == "conllpp" else f"{data}-") + f"{args.size}-{seed}"
    key += f"-m{member}" if member else ""
    key += f"-{args.epochs}-{Path(args.model or 'minilm').name}-{args.precision}"
    if getattr(args, "learning_rate", None) is not None:  # older caches: the scout's own
        key += f"-lr{args.learning_rate:g}"
    return args.cache / f"scout-{key}.npz"


def whole_set_settings(
    cache: Path, epochs: int | None = None, learning_rate: float | None = None
) -> argparse.Namespace:
    """The settings of a scout of the default encoder on the whole set, as :func:`cache_file`
    and :func:`scout_outputs` read them (``None``: the scout's own epochs or learning rate)."""
    return argparse.Namespace(
        cache=cache,
        size="all",
        epochs=epochs,
        learning_rate=learning_rate,
        max_steps=None,
        min_steps=None,
        model=None,
        device=None,
        precision="auto",
    )


def cached_outputs(path: Path, examples) -> tuple[list, list, float]:
    """:func:`scout_outputs` as a run left them in ``path``."""
    saved = np.load(path, allow_pickle=False)
    cuts = np.cumsum([len(ex.words) for ex in examples])[:-1]
    gold, tags = np.split(saved["gold"], cuts), np.split(saved["tags"], cuts)
    return gold, [list(t) for t in tags], float(saved["seconds"])


def scout_outputs(args, seed: int, examples, member: int = 0) -> tuple[list, list, float]:
    """Per example the scout's p(gold) of each word and its own tags, and the training seconds;
    from ``--cache`` when a run of the same settings left them there. ``member``: which scout of
    an ensemble (seed ``seed + 100 member``, as the real-error benchmark draws them)."""
    path = cache_file(args, seed, member) if args.cache else None
    if path is not None and path.exists():
        return cached_outputs(path, examples)
    fitted, seconds = harness.timed(member_scout(args, seed, member).fit, examples)
    proba = fitted.predict_proba(examples)
    gold, tags = save_outputs(path, examples, fitted.labels_, proba, seconds)
    return gold, tags, seconds


def save_outputs(path: Path | None, examples, labels, proba, seconds: float) -> tuple[list, list]:
    """A fitted scout's p(gold) of each word and its own tags, per example, from its
    probabilities ``proba`` (columns in ``labels``' order); kept in ``path`` (None: not kept),
    where :func:`cached_outputs` reads them."""
    gold = harness.word_gold(examples, labels, proba)
    tags = [[labels[j] for j in p.argmax(axis=1)] for p in proba]
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            path, gold=np.concatenate(gold), tags=np.concatenate(tags), seconds=seconds
        )
    return gold, tags


def member_scout(args, seed: int, member: int):
    """The unfitted scout ``member`` of an ensemble of seed ``seed``: seed ``seed + 100
    member``, as the real-error benchmark draws them (member 0: the seed's own scout)."""
    return scout(args, seed + 100 * member)


def mean_gold(members) -> list[np.ndarray]:
    """Per example, the members' p(gold) of each word averaged (``members``: one list per
    scout of one array per example, shape (n_words,))."""
    return [np.mean(words, axis=0) for words in zip(*members, strict=True)]


def ensemble_outputs(args, seed: int, examples) -> tuple[list, list, float]:
    """:func:`scout_outputs` of ``--ensemble`` scouts: p(gold) averaged, the first scout's tags,
    the seconds summed."""
    members = [scout_outputs(args, seed, examples, j) for j in range(args.ensemble)]
    gold = mean_gold([m[0] for m in members])
    return gold, members[0][1], sum(m[2] for m in members)


def run_seed(args, seed: int, pair) -> dict:
    original, corrected, all_flags = pair
    pick = draw(args.size, seed, len(original))
    examples = [original[i] for i in pick]
    fixed = [corrected[i] for i in pick]
    flags = all_flags[pick]
    scout_gold, tags, train_s = ensemble_outputs(args, seed, examples)

    crf_options = {} if args.crf_iterations is None else {"max_iterations": args.crf_iterations}
    if args.crf_context_dims is not None:
        crf_options["context_dims"] = args.crf_context_dims
    crf = FeatureTagger(**crf_options).fit(examples) if args.crf else None

    def with_crf(annotations, gold, reviewed=()) -> list:  # the product's p(gold): the CRF's beside
        if crf is None:
            return gold
        if annotations is examples:
            return mix_gold(gold, crf.gold_proba(annotations))
        # as the product's refresh: the texts' context projection kept, the tags trained again
        extra = [annotations[i] for i in reviewed] * (args.refit_weight - 1)
        iterations = "same" if args.refit_iterations is None else args.refit_iterations or None
        tagger = crf.refit([*annotations, *extra], iterations)
        share = {} if args.refit_share is None else {"share": args.refit_share}
        return mix_gold(gold, tagger.gold_proba(annotations), **share)

    gold = with_crf(examples, scout_gold)
    quality = harness.served_score(examples, gold, args.softmin_temperature)
    X, _ = sentence_features(examples, gold, tags)
    n_errors = int(flags.sum())
    if not n_errors:
        raise ValueError(
            f"the {len(examples)} sentences of seed {seed} hold no error: a larger --size"
        )
    out = {"seed": seed, "n": len(examples), "n_errors": n_errors, "scout_seconds": train_s}
    orders = {**harness.trivial_baselines(examples, "ner", seed)}
    orders["consistency"] = consistency_scores(examples, "ner")
    out["baselines"] = {}
    for name, order in orders.items():  # read in a fixed order, no model
        rounds = review(order, flags, examples, fixed, args.batch, "static")
        out["baselines"][name] = {
            "found_x1": found_after(rounds, n_errors) / n_errors,
            "found_x2": found_after(rounds, 2 * n_errors) / n_errors,
            "reads_90": reads_to_find(rounds, 0.9 * n_errors),
        }

    serving = {}  # the scouts' p(gold) the refits mix with: the last retrain's
    # --sink: each sentence's most doubted pair, of the latest scoring
    doubted = {
        "pairs": most_doubted(examples, gold, args.slip_keys) if args.sink is not None else None
    }

    def served(now, gold_now) -> np.ndarray:
        if args.sink is not None:
            doubted["pairs"] = most_doubted(now, gold_now, args.slip_keys)
        return harness.served_score(now, gold_now, args.softmin_temperature)

    def rescore(now, reviewed) -> np.ndarray:  # fresh scouts of the seed on the annotations
        weight = reviewed_weights(len(now), reviewed, args.retrain_weight)
        members = []
        for member in range(args.ensemble):  # as the backend's training: every member anew
            fitted = member_scout(args, seed, member).fit(now, sample_weight=weight)
            members.append(harness.word_gold(now, fitted.labels_, fitted.predict_proba(now)))
        serving["gold"] = mean_gold(members)
        counted = () if weight is None else reviewed  # the CRF's: as the refresh counts them
        return served(now, with_crf(now, serving["gold"], counted))

    def refit(now, reviewed) -> np.ndarray:  # the same scouts, a CRF refitted on the annotations
        # the scouts' p(gold) of a fixed sentence is of its old tags: it is read already
        return served(now, with_crf(now, serving["gold"], reviewed))

    first_doubted = doubted["pairs"]
    for policy in args.policies:
        serving["gold"] = scout_gold
        doubted["pairs"] = first_doubted
        rounds = review(
            quality,
            flags,
            examples,
            fixed,
            args.batch,
            policy,
            boost=args.boost,
            copies_boost=args.copies_boost,
            propagate_after=args.propagate_after,
            propagate_rule=args.propagate_rule,
            slip_keys=args.slip_keys,
            sink=args.sink,
            doubted=lambda: doubted["pairs"],
            X=X,
            C=args.ranker_c,
            rescore=rescore,
            refit=refit,
            retrain_every=args.retrain_every,
            retrain_until=args.retrain_until or 2 * n_errors,
            refit_every=args.refit_every,
            refit_until=args.refit_until or 5 * n_errors,
        )
        out[policy] = {
            "found_x1": found_after(rounds, n_errors) / n_errors,
            "found_x2": found_after(rounds, 2 * n_errors) / n_errors,
            "reads_90": reads_to_find(rounds, 0.9 * n_errors),
            "round_seconds": float(np.mean([r["seconds"] for r in rounds])),
            "curve": [(r["reviewed"], r["found"]) for r in rounds],
        }
    return out


def summarize(runs) -> dict:
    out = {
        policy: harness.summarize_rows(
            [run[policy] for run in runs], ("found_x1", "found_x2", "reads_90", "round_seconds")
        )
        for policy in POLICIES
        if policy in runs[0]
    }
    for name in runs[0]["baselines"]:
        out[f"baseline: {name}"] = harness.summarize_rows(
            [run["baselines"][name] for run in runs], ("found_x1", "found_x2", "reads_90")
        )
    return out


def _where_set(cfg: dict, key: str, text: str) -> str:
    """``text`` with ``cfg[key]`` in its ``{}`` where the run set ``key`` (not None); else ""."""
    return text.format(cfg[key]) if cfg.get(key) is not None else ""


def markdown(result) -> str:
    cfg, runs = result["config"], result["runs"]
    lines = [
        "## The review loop on real errors: "
        + DATA_SETS[cfg.get("data", "conllpp")].replace(
            " (original) against CoNLL++ (corrected)", " against CoNLL++"
        ),
        "",
        f"{runs[0]['n']} sentences ({cfg['size']}), {runs[0]['n_errors']} erroneous in the first "
        f"draw (base rate {runs[0]['n_errors'] / runs[0]['n']:.3f}); rounds of {cfg['batch']}; "
        f"propagate boost {cfg['boost']} per "
        + (
            "fix of the slip (`count`)"
            if cfg.get("propagate_rule", "count") == "count"
            else "fix of the slip less the sentences read that held it unchanged (`net`)"
        )
        + (
            ", a slip being each word of the changed spans with its type (`--slip-keys word`)"
            if cfg.get("slip_keys", "word") == "word"
            else ", a slip being a whole entity or a capitalised word outside them"
        )
        + (
            f"; copies: a sentence times {cfg.get('copies_boost') or cfg['boost']} per decided "
            "copy labelling it otherwise"
            if any("copies" in p for p in cfg.get("policies") or ())
            else ""
        )
        + _where_set(
            cfg,
            "sink",
            "; a sentence's doubt times {} per sentence read that held its most doubted pair "
            "unchanged (`--sink`)",
        )
        + f"; learn: ReviewRanker(C={cfg.get('ranker_c', 0.05)}); "
        + (
            f"p(gold) averaged over {cfg['ensemble']} scouts; "
            if cfg.get("ensemble", 1) > 1
            else ""
        )
        + (
            "the scout's p(gold) averaged with a CRF's, half each (the product's default"
            + _where_set(cfg, "crf_iterations", "; the CRF's L-BFGS capped at {} iterations")
            + _where_set(cfg, "crf_context_dims", "; {} context components")
            + "); "
            + (
                f"refit-crf: the CRF refits every {cfg['refit_every']} round(s) until "
                f"{cfg['refit_until'] or 'five times the errors'} sentences are read "
                "(`propagate+refit-crf` is what the backend serves: its refresh after each "
                "batch of decisions and the slips moved up)"
                + (
                    f", each reviewed sentence counted {cfg['refit_weight']} times (the "
                    "backend's: what a reviewer decided outweighs the rest)"
                    if cfg.get("refit_weight", 1) != 1
                    else ""
                )
                + (
                    f", {cfg['refit_iterations'] or 'converged'} L-BFGS iterations"
                    if cfg.get("refit_iterations") is not None
                    else ""
                )
                + _where_set(cfg, "refit_share", ", the refitted CRF's share {}")
                + "; "
                if "refit_every" in cfg
                else ""
            )
            + f"retrain: every {cfg['retrain_every']} rounds until "
            f"{cfg['retrain_until'] or 'twice the errors'} sentences are read"
            + (
                f", each reviewed sentence's loss weighted {cfg['retrain_weight']:g} in the "
                "retrained scouts"
                if cfg.get("retrain_weight", 1) != 1
                else ""
            )
            + ". "
            if cfg.get("crf")
            else ""
        )
        + f"Share of the errors found, mean ± sd over {len(runs)} "
        "seeds, counted at that read (a round is read in its order). `static` is the served "
        "default score on the same scout (the soft minimum "
        "over the annotated entities, each once, and the words outside them, at temperature "
        f"{cfg.get('softmin_temperature', 0)}); the baselines read in a fixed order with no "
        "model and learn nothing.",
        "",
        *harness.table(
            ["policy", "found after reading x1 errors", "x2", "read to find 90%", "s/round"],
            [
                [
                    p,
                    harness.pm(s["found_x1"]),
                    harness.pm(s["found_x2"]),
                    harness.pm(s["reads_90"], 0),
                    f"{s['round_seconds']['mean']:.4f}" if "round_seconds" in s else "",
                ]
                for p, s in result["summary"].items()
            ],
        ),
        "",
        "![errors found against sentences reviewed](" + f"{cfg['name']}.png)",
        "",
        *harness.footer(result),
    ]
    return "\n".join(lines) + "\n"


def plot(result, path) -> None:
    with harness.figure(path) as ax:
        present = [p for p in POLICIES if p in result["runs"][0]]
        styles = ("-", "--", ":", "-.", (0, (1, 3)), (0, (5, 1)), (0, (3, 1, 1, 1)), (0, (1, 1)))
        for policy, style in zip(present, styles):  # linestyles
            for k, run in enumerate(result["runs"]):
                xs, ys = zip(*run[policy]["curve"])
                ax.plot(
                    xs,
                    np.array(ys) / run["n_errors"],
                    linestyle=style,
                    color=f"C{k}",
                    label=f"{policy}, seed {run['seed']}",
                )
        ax.axvline(2 * result["runs"][0]["n_errors"], color="grey", lw=0.8)
        ax.set_xlabel("sentences reviewed")
        ax.set_ylabel("share of the errors found")
        ax.legend(fontsize=7)


def main(argv=None) -> int:
    args = parse_args(argv)
    harness.start(args.threads)
    pair = load_pair(args.data)
    earlier = harness.earlier_result(args.out, args.name, args.resume)
    runs = earlier["runs"] if earlier else []  # --resume: the seeds a stopped run finished

    def saved(runs) -> dict:
        result = {
            **harness.stamp(harness.command(NAME, argv)),
            "config": harness.config(args),
            "complete": len(runs) == args.seeds,
            "summary": summarize(runs),
            "runs": runs,
        }
        harness.save(args.out, args.name, result, markdown(result))
        plot(result, args.out / f"{args.name}.png")
        return result

    result = saved(runs) if runs else None
    for seed in range(len(runs), args.seeds):
        runs.append(run_seed(args, seed, pair))
        result = saved(runs)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
