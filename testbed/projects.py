"""Real Label Studio projects for integration tests, benchmarks and the screenshot script.

NER (CoNLL-2003) and classification (SST-2) task lists with deliberately wrong annotations, in
Label Studio's import format, and helpers to wait for the backend's training.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from subregweigh.io import read_conll, read_tsv
from subregweigh.tags import entity_spans
from testbed.servers import BackendServer, LabelStudioServer, http_json, require_label_studio

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
# How often the waits below ask the backend: a training ends between two asks.
POLL_SECONDS = 0.5
# A training refused (too few annotations) that long, no other started: wait_trained gives up.
REFUSED_SECONDS = 30.0
N_TASKS, N_WRONG = 50, 5
TYPES = ["PER", "LOC", "ORG", "MISC"]
NER_CONFIG = (
    '<View><Labels name="label" toName="text">'
    + "".join(f'<Label value="{t}"/>' for t in TYPES)
    + '</Labels><Text name="text" value="$text"/></View>'
)
CLS_CONFIG = (
    '<View><Text name="text" value="$text"/><Choices name="sentiment" toName="text" '
    'choice="single">'
    '<Choice value="negative"/><Choice value="positive"/></Choices></View>'
)
ENGINE_ENV = {  # a small configuration for CI's 2 cores
    "SRW_N": "100",
    "SRW_K": "10",
    "SRW_EPOCHS": "8",
    "SRW_SCOUTS": "1",  # the default ensemble's mechanics have tests of their own
    "SRW_MIN_ANNOTATIONS": "10",
    "SRW_RETRAIN_AFTER": "1000",
    "LOG_LEVEL": "INFO",
}


def _recurring(examples, key, min_count: int) -> set:
    counts: dict = {}
    for ex in examples:
        for k in set(key(ex)):
            counts[k] = counts.get(k, 0) + 1
    return {k for k, c in counts.items() if c >= min_count}


def _mentions(ex) -> list[tuple[str, str]]:
    return [(" ".join(ex.words[s:e]), t) for t, s, e in entity_spans(ex.label)]


def _ner_pool() -> tuple[list, set]:
    """CoNLL sentences that mention an entity recurring in the pool, and those mentions."""
    sentences = [
        ex
        for ex in read_conll(DATA / "conllpp" / "conllpp_train.txt")[:4000]
        if 6 <= len(ex.words) <= 30 and any(w.islower() for w in ex.words)
    ]
    frequent = _recurring(sentences, _mentions, min_count=15)
    return [ex for ex in sentences if set(_mentions(ex)) & frequent], frequent


def _spans(ex, frequent: set, wrong: str | None = None) -> list[tuple[str, int, int]]:
    """The sentence's entities; ``wrong``: its first recurring mention given the next type of
    :data:`TYPES` (``"retype"``) or left out (``"miss"``), a known error."""
    spans = list(entity_spans(ex.label))
    if wrong is not None:
        j = next(j for j, (t, s, e) in enumerate(spans) if (" ".join(ex.words[s:e]), t) in frequent)
        t, s, e = spans[j]
        if wrong == "miss":
            del spans[j]
        else:
            spans[j] = (TYPES[(TYPES.index(t) + 1) % len(TYPES)], s, e)
    return spans


def _regions(ex, spans) -> list[dict]:
    starts = np.cumsum([0] + [len(w) + 1 for w in ex.words])
    return [
        {
            "id": f"r{j}",
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "value": {"start": int(starts[s]), "end": int(starts[e] - 1), "labels": [etype]},
        }
        for j, (etype, s, e) in enumerate(spans)
    ]


def ner_tasks(rng, n_tasks: int = N_TASKS, n_wrong: int = N_WRONG) -> tuple[list[dict], set[int]]:
    """Tasks with span annotations; the annotations of the returned indices are wrong.

    Like real annotation errors, the wrong ones contradict the rest of the project: each of the
    50 sentences mentions an entity that recurs in the project, and a wrong annotation gives
    that mention another type, or misses it.
    """
    pool, frequent = _ner_pool()
    chosen = [pool[i] for i in sorted(rng.choice(len(pool), n_tasks, replace=False))]
    wrong = sorted(rng.choice(n_tasks, n_wrong, replace=False).tolist())
    tasks = []
    for i, ex in enumerate(chosen):
        kind = None if i not in wrong else ("miss" if wrong.index(i) % 2 else "retype")
        tasks.append(_annotated_task(ex, _spans(ex, frequent, kind)))
    return tasks, set(wrong)


def retyped_region(seed: int, tasks: list[dict], wrong: set[int], n_tasks: int):
    """The first of ``wrong`` (``tasks, wrong = ner_tasks(default_rng(seed), n_tasks, ...)``)
    whose entity is retyped, as ``(index, region, right label)``: a region's type to fix. The
    same sentences drawn without errors say the right label."""
    gold, _ = ner_tasks(np.random.default_rng(seed), n_tasks, 0)
    fix = sorted(wrong)[0]  # ner_tasks retypes the first wrong one (every other one)
    (region, right), *_ = [
        (r, g["value"]["labels"][0])
        for r, g in zip(
            tasks[fix]["annotations"][0]["result"], gold[fix]["annotations"][0]["result"]
        )
        if r["value"]["labels"] != g["value"]["labels"]
    ]
    return fix, region, right


def _annotated_task(ex, spans) -> dict:
    """A task of sentence ``ex`` with one annotation: the entities ``spans``."""
    return {"data": {"text": " ".join(ex.words)}, "annotations": [{"result": _regions(ex, spans)}]}


def annotated_tasks(examples) -> list[dict]:
    """Each of ``examples`` (words and IOB2 tags) as a task annotated with its gold entities."""
    return [_annotated_task(ex, entity_spans(ex.label)) for ex in examples]


def conll_tasks(rng, n_tasks: int, sentences_per_task: int = 1) -> list[dict]:
    """``n_tasks`` CoNLL-2003 training sentences drawn at random (of 14,041), in file order, each
    a task annotated with its gold entities; beyond 14,041 drawn with replacement (a larger
    project's size and lengths, with repeated sentences). ``sentences_per_task`` > 1: each
    task holds that many consecutive sentences from the one drawn (long texts, slow steps)."""
    sentences = read_conll(DATA / "conllpp" / "conllpp_train.txt")
    last = len(sentences) - sentences_per_task + 1
    chosen = sorted(rng.choice(last, n_tasks, replace=n_tasks > last))
    texts = [sentences[i : i + sentences_per_task] for i in chosen]
    return annotated_tasks(
        SimpleNamespace(
            words=[w for s in text for w in s.words], label=[t for s in text for t in s.label]
        )
        for text in texts
    )


# A team: two careful annotators share the tasks; a careless one annotates some of them again
# (overlap) and retypes a recurring entity in some of hers.
TEAM = ("alice@example.com", "bob@example.com", "carol@example.com")


# The team project's scout: small for CI's 2 cores; batches of 4 give 40 annotations enough
# optimizer steps in 15 epochs.
TEAM_ENV = {**ENGINE_ENV, "SRW_EPOCHS": "15", "SRW_N": "30", "SRW_K": "5"}


def create_users(ls_server, emails=TEAM) -> dict[str, int]:
    """Label Studio users (email -> id), so that imported annotations can name them."""
    ids = {}
    for email in emails:
        user = ls_server.api(
            "POST",
            "/api/users/",
            {"email": email, "username": email.split("@")[0], "password": "pw-" + email},
        )
        ids[email] = user["id"]
    return ids


def team_ner_tasks(
    rng, users: dict[str, int], n_tasks: int = 30, n_overlap: int = 10, n_wrong: int = 5
) -> tuple[list[dict], list[dict]]:
    """NER tasks annotated by :data:`TEAM`: alice and bob annotate half the tasks each,
    correctly; carol annotates the first ``n_overlap`` again, ``n_wrong`` of them with a
    recurring entity retyped.

    Returns
    -------
    tasks : list of dict
        In Label Studio's import format, each annotation ``completed_by`` its user's id.
    annotations : list of dict
        What was built, one per annotation: ``task`` (index), ``annotator`` (email),
        ``wrong`` (bool), ``entities`` (the annotation's entity types, for counting).
    """
    alice, bob, carol = TEAM
    pool, frequent = _ner_pool()
    chosen = [pool[i] for i in sorted(rng.choice(len(pool), n_tasks, replace=False))]
    wrong = set(rng.choice(n_overlap, n_wrong, replace=False).tolist())
    tasks, built = [], []
    for i, ex in enumerate(chosen):
        made = [(alice if i < n_tasks // 2 else bob, None)]
        if i < n_overlap:
            made.append((carol, "retype" if i in wrong else None))
        annotations = []
        for who, error in made:
            spans = _spans(ex, frequent, error)
            annotations.append({"result": _regions(ex, spans), "completed_by": users[who]})
            built.append(
                {
                    "task": i,
                    "annotator": who,
                    "wrong": error is not None,
                    "entities": [t for t, _, _ in spans],
                }
            )
        tasks.append({"data": {"text": " ".join(ex.words)}, "annotations": annotations})
    return tasks, built


def classification_tasks(
    rng, n_tasks: int = N_TASKS, n_wrong: int = N_WRONG
) -> tuple[list[dict], set[int]]:
    """SST-2 rows sharing clear sentiment words with others in the project; 10% flipped."""
    rows = [r for r in read_tsv(DATA / "sst2" / "train.tsv")[:20000] if 6 <= len(r.words) <= 30]
    cues = {
        "best",
        "great",
        "wonderful",
        "beautiful",
        "funny",
        "worst",
        "boring",
        "dull",
        "bad",
        "mess",
    }
    pool = [r for r in rows if cues & set(r.words)]
    chosen = [pool[i] for i in sorted(rng.choice(len(pool), n_tasks, replace=False))]
    wrong = set(rng.choice(n_tasks, n_wrong, replace=False).tolist())
    names = {"0": "negative", "1": "positive"}
    tasks = []
    for i, ex in enumerate(chosen):
        label = names[ex.label[0]]
        if i in wrong:
            label = "positive" if label == "negative" else "negative"
        tasks.append(
            {
                "data": {"text": ex.text},
                "annotations": [
                    {
                        "result": [
                            {
                                "id": "c0",
                                "from_name": "sentiment",
                                "to_name": "text",
                                "type": "choices",
                                "value": {"choices": [label]},
                            }
                        ]
                    }
                ],
            }
        )
    return tasks, wrong


# The end-to-end tests' projects (tests/labelstudio/test_e2e_label_studio.py;
# benchmarks/selftest_projects.py runs the self-test on the same): name, labeling config, task
# maker, scout settings for 50-100 tasks on 2 CPU cores. Their epochs were cut for CI's time on
# the end-to-end detection check (100 tasks, 10 wrong, seeded): NER AP 0.900 at 6 epochs
# against 0.835 at 15, sentiment 0.551 at 10 against 0.566 at 20 (and 0.573 at 15).
PROJECTS = [
    ("ner", NER_CONFIG, ner_tasks, {"SRW_EPOCHS": "6"}),
    # 50 tasks: fine-tuning memorizes the flipped labels (mean score 0.96 wrong vs 1.00
    # correct); a head on the frozen encoder does not.
    (
        "sentiment",
        CLS_CONFIG,
        classification_tasks,
        {"SRW_FREEZE_ENCODER": "1", "SRW_EPOCHS": "10", "SRW_LEARNING_RATE": "3e-3"},
    ),
]


class TrainingFailed(AssertionError):
    """The backend reported a failed training, or none finished in time."""


def wait_trained(
    backend: BackendServer,
    project: int,
    timeout: float = 900.0,
    auth: tuple | None = None,
    previous: str | None = None,
) -> dict:
    """The project's status once a training has published a version (other than
    ``previous``) and nothing runs. TrainingFailed when a training fails, or is refused (too
    few annotations) and none other starts within :data:`REFUSED_SECONDS`."""
    deadline = time.monotonic() + timeout
    status, refused_since = {}, None
    while time.monotonic() < deadline:
        code, status = backend.get(f"/status?project={project}", auth=auth)
        assert code == 200, status
        if status["state"] == "failed":
            raise TrainingFailed(f"training failed: {status['last_error']}\n{backend.log()}")
        published = status["current_version"] not in (None, previous)
        if published and status["job"] == "idle" and status["state"] == "idle":
            return status
        refused = status.get("trained") is False and status["job"] == "idle"
        refused_since = (refused_since or time.monotonic()) if refused else None
        if refused and time.monotonic() - refused_since > REFUSED_SECONDS:
            raise TrainingFailed(f"the training published nothing: {status['message']}")
        time.sleep(POLL_SECONDS)
    raise TrainingFailed(f"training did not finish in {timeout:.0f} s: {status}\n{backend.log()}")


def retyped(result: list[dict]) -> list[dict]:
    """An annotation's regions with the first entity given the next type of :data:`TYPES`."""
    first = result[0]
    label = first["value"]["labels"][0]
    value = {**first["value"], "labels": [TYPES[(TYPES.index(label) + 1) % len(TYPES)]]}
    return [{**first, "value": value}] + result[1:]


def score_below(value: float) -> str:
    """The Data Manager's filter "Prediction score < value", as the JSON ``query`` of
    ``/api/tasks`` (and of label-studio-sdk's ``tasks.list``)."""
    item = {
        "filter": "filter:tasks:predictions_score",
        "operator": "less",
        "type": "Number",
        "value": value,
    }
    return json.dumps({"filters": {"conjunction": "and", "items": [item]}})


def field(obj, name):
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


def undecided_score(project_root, version: str, task, entry: dict | None = None) -> float:
    """The score ``version`` of the project stored in ``project_root`` (``models/<project>``)
    serves ``task`` with while no reviewer decided anything: its stored entry (``entry``, else
    read from ``scores.json``) on the version's one scale (``backend.review.served``)."""
    from backend.review import reviews, served
    from backend.store.store import ProjectStore

    root = Path(project_root)
    store = ProjectStore(root.parent, root.name)
    entry = entry if entry is not None else store.scores(version)[str(task)]
    scales = reviews.version_scales(store, version)
    return served.served_entry(str(task), entry, {}, scales)["score"]


def publish_scout(
    model_dir,
    project: int | str,
    scout,
    version: str | None = None,
    scores: dict | None = None,
    meta=None,
    learned=None,
) -> str:
    """Publish ``scout`` as a version of ``project`` the way a training does; returns its name.
    ``meta``: the version's meta.json, or a function of the version's name that gives it;
    ``learned``: what the scout learned (a :class:`subregweigh.learned.Learned`), kept with it."""
    from backend.serving.publish import with_scales
    from backend.store.store import ProjectStore
    from backend.store.versions import new_version_name
    from subregweigh.io.atomic import atomic_write_json

    store = ProjectStore(model_dir, project)
    staging = store.staging_dir()
    scout.save(staging / "scout")
    if learned is not None:
        from subregweigh.learned import learned_path

        learned.save(learned_path(staging))
    atomic_write_json(staging / "scores.json", scores or {})
    version = version or new_version_name()
    meta = meta(version) if callable(meta) else meta
    scaled, scales = with_scales(meta or {}, scores or {})  # a training's meta holds its scale
    if meta is not None or scales:
        atomic_write_json(staging / "meta.json", scaled)
    store.publish(staging, version)
    return version


def ner_task(task_id: int, text: str) -> dict:
    """A task as Label Studio sends it to /predict, without annotations."""
    return {"id": task_id, "data": {"text": text}, "annotations": [], "predictions": []}


def wait_selftest(
    backend: BackendServer, project: int, timeout: float = 900.0, auth: tuple | None = None
) -> dict:
    """The ``selftest`` of the project's status once the self-test job has finished."""
    deadline = time.monotonic() + timeout
    while True:
        code, status = backend.get(f"/status?project={project}", auth=auth)
        assert code == 200, status
        selftest = status["selftest"]
        if selftest["state"] == "failed":
            raise TrainingFailed(f"self-test failed: {selftest}\n{backend.log()}")
        if selftest["state"] == "idle" and selftest.get("results") and selftest["job"] == "idle":
            return selftest
        if time.monotonic() > deadline:
            raise TrainingFailed(f"self-test did not finish in {timeout:.0f} s: {selftest}")
        time.sleep(POLL_SECONDS)


# Who made the annotations a test imports, unless a task names someone: a user of their own,
# so that the admin's saves through the API or the browser are a reviewer's, not the annotator
# reviewing her own work (a self-review, which decides nothing by default:
# backend.review.decisions).
ANNOTATOR = "annotator@example.com"


def annotator_id(ls, email: str = ANNOTATOR) -> int:
    """The id of the Label Studio user ``email`` (``ls``, a label-studio-sdk client), created in
    the admin's organization when there is none."""
    for user in ls.users.list():
        if user.email == email:
            return user.id
    return ls.users.create(email=email, username=email.split("@")[0], password="pw-" + email).id


def import_tasks(ls, project: int, tasks: list[dict], annotator: str = ANNOTATOR) -> list[int]:
    """Import ``tasks`` into ``project`` with ``ls``, a label-studio-sdk client: their ids, in
    order. Annotations that name no ``completed_by`` are made by ``annotator`` (a user created
    when needed). Label Studio 1.23 once answered 201 and kept none of the annotations (a CI
    run, the server busy with another project's predictions): then the tasks are deleted and
    imported again, once; short again, ImportShort."""
    expected = sum(len(task.get("annotations") or ()) for task in tasks)
    if expected and any("completed_by" not in a for t in tasks for a in t.get("annotations") or ()):
        who = annotator_id(ls, annotator)
        tasks = [
            {
                **task,
                "annotations": [{"completed_by": who, **a} for a in task.get("annotations") or ()],
            }
            if task.get("annotations")
            else task
            for task in tasks
        ]
    for attempt in range(2):
        imported = ls.projects.import_tasks(id=project, request=tasks, return_task_ids=True)
        if (imported.annotation_count or 0) >= expected:
            wait_counted(ls, project, expected)
            return list(imported.task_ids)
        if attempt == 0:
            ls.tasks.delete_all_tasks(id=project)
    raise ImportShort(
        f"project {project}: Label Studio kept {imported.annotation_count} of the {expected} "
        f"annotations of {len(tasks)} imported tasks, twice"
    )


COUNTED_SECONDS = 120.0  # how long Label Studio's project counters may lag an import


def wait_counted(ls, project: int, annotations: int, timeout: float = COUNTED_SECONDS) -> None:
    """Wait until Label Studio's project counters (``total_annotations_number``) count the
    ``annotations`` just imported. They lag an import under load (a CI run: *Start Training*
    refused "0 of 24 tasks are annotated" for 24 imported annotated tasks); the backend answers
    from them, as Label Studio's own project page does, so a test starts training once a user
    would see the annotations counted."""
    deadline = time.monotonic() + timeout
    while (counted := ls.projects.get(id=project).total_annotations_number or 0) < annotations:
        if time.monotonic() > deadline:
            raise ImportShort(
                f"project {project}: Label Studio counts {counted} of the {annotations} "
                f"imported annotations after {timeout:.0f} s"
            )
        time.sleep(0.5)


class ImportShort(RuntimeError):
    """Label Studio kept fewer annotations than a test imported."""


def connect_model(ls: LabelStudioServer, project: int, url: str, extra_params, ml=None):
    """POST /api/ml (or PATCH /api/ml/{ml}, with the url and project Label Studio 1.23 needs
    beside extra_params) as the connection dialog sends it: ``(status, reply)``."""
    body = {"project": project, "url": url, "title": "subregweigh", "extra_params": extra_params}
    if ml is None:
        return http_json("POST", f"{ls.url}/api/ml", token=ls.token, body=body)
    return http_json("PATCH", f"{ls.url}/api/ml/{ml}", token=ls.token, body=body)


def connect_and_train(ls, project: int, backend_url: str, **login):
    """Connect ``project`` to the backend at ``backend_url`` (``login``: the connection's basic
    auth fields) and start its training, as a user does with ``ls``, a label-studio-sdk client;
    the connection."""
    ml = ls.ml.create(project=project, url=backend_url, title="subregweigh", **login)
    ls.ml.train(id=ml.id)
    return ml


def trained_ner_project(ls_server, backend: BackendServer, title: str, seed: int = 7):
    """The :func:`ner_tasks` project in a real Label Studio, connected to ``backend`` and trained
    through Label Studio.

    Returns ``(project id, task ids in import order, indices of the wrong annotations' tasks,
    status after training)``.
    """
    ls = ls_server.sdk()
    tasks, wrong = ner_tasks(np.random.default_rng(seed))
    project = ls.projects.create(title=title, label_config=NER_CONFIG)
    ids = import_tasks(ls, project.id, tasks)
    connect_and_train(ls, project.id, backend.url)
    return project.id, ids, wrong, wait_trained(backend, project.id)


@contextlib.contextmanager
def trained_ner_backend(folder: Path, title: str, seed: int, n_tasks: int, n_wrong: int):
    """A real Label Studio and our backend (:data:`ENGINE_ENV`, 4 epochs; models and log in
    ``folder``), a :func:`ner_tasks` project of ``n_tasks`` tasks (``n_wrong`` wrong) connected
    and trained once. Yields a namespace: ``label_studio``, ``backend``, ``ls`` (the SDK),
    ``ml`` (the ML backend's record), ``project``, ``root`` (the project's model folder) and
    ``first`` (the version the training served)."""
    tasks, _ = ner_tasks(np.random.default_rng(seed), n_tasks, n_wrong)
    with LabelStudioServer() as label_studio:
        env = {**ENGINE_ENV, "SRW_EPOCHS": "4", **label_studio.backend_env}
        with BackendServer(folder / "models", env, folder / "backend.log") as backend:
            ls = label_studio.sdk()
            project = ls.projects.create(title=title, label_config=NER_CONFIG)
            import_tasks(ls, project.id, tasks)
            ml = connect_and_train(ls, project.id, backend.url)
            status = wait_trained(backend, project.id)
            yield SimpleNamespace(
                label_studio=label_studio,
                backend=backend,
                ls=ls,
                ml=ml,
                project=project.id,
                root=folder / "models" / str(project.id),
                first=status["current_version"],
            )


def trained_ner_module(
    tmp_path_factory, title: str, seed: int, n_wrong: int = 0, n_tasks: int = 30
):
    """What a test module's ``trained`` fixture (module scope) yields from:
    :func:`trained_ner_backend` in a folder of its own (skipped where Label Studio is not
    installed, :func:`testbed.servers.require_label_studio`)."""
    require_label_studio()
    folder = tmp_path_factory.mktemp(title.replace(" ", "-"))
    with trained_ner_backend(folder, title, seed=seed, n_tasks=n_tasks, n_wrong=n_wrong) as ctx:
        yield ctx


def team_project(ls_server, backend: BackendServer, auth: tuple | None = None, seed: int = 11):
    """The :func:`team_ner_tasks` project in a real Label Studio, its users created, connected to
    ``backend`` (with basic auth ``auth``) and trained through Label Studio.

    Returns ``(project id, task ids in import order, what was built, status after training)``.
    """
    ls = ls_server.sdk()
    tasks, built = team_ner_tasks(np.random.default_rng(seed), create_users(ls_server))
    project = ls.projects.create(title="Team NER", label_config=NER_CONFIG)
    ids = import_tasks(ls, project.id, tasks)
    login = {}
    if auth:  # Label Studio calls the backend with this user and password
        login = dict(auth_method="BASIC_AUTH", basic_auth_user=auth[0], basic_auth_pass=auth[1])
    connect_and_train(ls, project.id, backend.url, **login)
    status = wait_trained(backend, project.id, auth=auth)
    return project.id, ids, built, status


def serving_prediction(backend: BackendServer, ls_server, project: int, task: int, timeout=60.0):
    """The task's one prediction (a dict) of the version serving ``project``, read while that
    version stayed the same: after each change a refresh (backend.jobs.refresh) may replace the
    serving version at any moment, and then delete the old one's predictions."""
    deadline = time.monotonic() + timeout
    while True:
        version = backend.get(f"/status?project={project}")[1]["current_version"]
        mine = [
            p
            for p in ls_server.api("GET", f"/api/predictions?task={task}")
            if p["model_version"] == version
        ]
        if backend.get(f"/status?project={project}")[1]["current_version"] == version:
            if len(mine) == 1:
                return mine[0]
        assert time.monotonic() < deadline, f"task {task}: {len(mine)} predictions of {version}"
        time.sleep(0.2)


def serving_score(
    backend: BackendServer, root: Path, project: int, task: int, timeout=60.0
) -> float:
    """The score the version serving ``project`` (``root``: the project's folder under
    MODEL_DIR) has for the task before any decision (:func:`undecided_score`: its stored entry
    on the version's one scale), read while that version stayed the same (see
    :func:`serving_prediction`)."""
    deadline = time.monotonic() + timeout
    while True:
        version = backend.get(f"/status?project={project}")[1]["current_version"]
        try:
            scores = json.loads((root / "versions" / version / "scores.json").read_text())
        except FileNotFoundError:  # pruned by the versions that replaced it
            scores = None
        if scores and backend.get(f"/status?project={project}")[1]["current_version"] == version:
            return undecided_score(root, version, task, scores[str(task)])
        assert time.monotonic() < deadline, f"task {task}: no stable serving version"
        time.sleep(0.2)
