"""Fuzzing the HTTP endpoints with hypothesis: bad payloads never cause a server error.

Every endpoint (/setup, /predict, /webhook, /status, /is_training, /versions, /report,
/report.json, /selftest, /health) gets
arbitrary JSON, "almost valid" Label Studio payloads with one part replaced by junk, raw
non-JSON bytes, random query strings, methods and paths. Whatever comes in, the answer is never
a 5xx, every error is a JSON object with an "error" string, and afterwards the app still answers
/health and a valid /predict. A trained version is published for project 1, so valid-looking
/predict payloads go through the real scoring path (the tiny MiniLM scout, K=3).

In process through Flask's test client (1,500 cases), then 410 over real HTTP
against ``python _wsgi.py`` in its own process. Deterministic: derandomized, no example database.
``pytest tests/operations/test_fuzz.py -s -n 0`` prints the case counts.
"""

from __future__ import annotations

import base64
import json
import re
import string
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.config.settings import Settings
from backend.web.server import create_app
from testbed.projects import publish_scout
from testbed.servers import BackendServer, free_port
from tests.doubles import FakeRunner
from tests.paths import ROUTES

USER, PASSWORD = "fuzz-user", "fuzz-pass-3c1d8e"
API_KEY = "fuzz-apikey-9f8e7d6c5b4a39281706"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
GOOD = {"Authorization": f"Basic {TOKEN}"}
PROJECT = 1  # the project with a published version

NER_CONFIG = """<View>
  <Labels name="label" toName="text">
    <Label value="PER"/><Label value="LOC"/><Label value="ORG"/>
  </Labels>
  <Text name="text" value="$text"/>
</View>"""
CLS_CONFIG = """<View><Text name="text" value="$text"/>
  <Choices name="sentiment" toName="text" choice="multiple">
    <Choice value="pos"/><Choice value="neg"/>
  </Choices>
</View>"""
TEXTS = [
    "Angela Merkel visited Paris .",
    "EU rejects German call to boycott British lamb .",
    "Peter Blackburn",
    "BRUSSELS 1996-08-22",
    "Zürich , Ελλάδα und 東京 .",
]
VALID_PREDICT = {
    "project": f"{PROJECT}.1700000000",
    "label_config": NER_CONFIG,
    "tasks": [{"id": 1, "data": {"text": TEXTS[0]}, "annotations": [], "predictions": []}],
}

ENGINE = {"k": 3, "n_samples": 10, "retrain_after": 3, "min_annotations": 1000, "max_request_mb": 1}
RUN = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)

# ----------------------------------------------------------------------------- strategies

SURROGATES = ["\ud800", "a\udfffb", "\udc80\ud800"]
NASTY_STRINGS = [
    "",
    " ",
    "\x00",
    "1\x00",
    "../../etc/passwd",
    "..",
    "/",
    "%2e%2e%2f",
    "$(touch /tmp/x)",
    "{{7*7}}",
    "${7*7}",
    "__import__('os').system('id')",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "\u202e\u0661\u0662",
    "١٢",
    "²",
    "𝟏",
    "ｌ",
    "1e3",
    "0x1",
    "-1",
    " 1",
    "1 ",
    "+1",
    "NaN",
    "Infinity",
    "null",
    "true",
    "1" * 300,
    "\n\r\t",
    "é" * 50,
    "🙂" * 20,
    *SURROGATES,
]
BAD_PROJECTS = [
    "1",
    "1.123",
    "1.1700000000",
    {"id": 1},
    {"id": "1"},
    {"id": {"id": 1}},
    -1,
    0,
    1.5,
    -0.0,
    1e308,
    10**30,
    10**300,
    "../../etc",
    "1/../2",
    "1.2/../..",
    True,
    None,
    [],
    [1],
    {},
    "",
    *NASTY_STRINGS,
]
EVENTS = [
    "START_TRAINING",
    "ANNOTATION_CREATED",
    "ANNOTATION_UPDATED",
    "ANNOTATIONS_DELETED",
    "ANNOTATION_DELETED",
    "PROJECT_UPDATED",
    "TASKS_CREATED",
    "start_training",
    "",
    "NOPE",
]
KEYS = [
    "project",
    "tasks",
    "label_config",
    "schema",
    "action",
    "annotation",
    "annotations",
    "data",
    "id",
    "hostname",
    "access_token",
    "params",
    "task",
    "result",
    "value",
]

ints = (
    st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.sampled_from([0, -1, 2**31, 2**63, -(2**63), 10**20, 10**4000])
)
floats = st.floats(allow_nan=True, allow_infinity=True)
texts = st.text(max_size=24) | st.sampled_from(NASTY_STRINGS)
json_scalars = st.none() | st.booleans() | ints | floats | texts
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
junk_dicts = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), json_values, max_size=5)

# Label configs: well-formed XML built from Label Studio's tag names, templates with junk
# spliced in, external entities (XXE), DTDs, and plain non-XML text.
TAGS = [
    "View",
    "Text",
    "Labels",
    "Label",
    "Choices",
    "Choice",
    "Image",
    "Header",
    "TextArea",
    "Rating",
    "HyperText",
    "RectangleLabels",
    "Relations",
    "x:y",
    "script",
]
ATTRS = ["name", "toName", "value", "choice", "labels", "showInline", "background", "xmlns"]
attr_values = st.sampled_from(
    [
        "text",
        "label",
        "$text",
        "$",
        "$other",
        "multiple",
        "single",
        "PER",
        "",
        "&quot;",
        "&amp;",
        "text,label",
    ]
) | st.text(alphabet=string.ascii_letters + string.digits + "$_-. ", max_size=10)


def _element(children):
    return st.builds(
        lambda tag, attrs, kids: "<{0}{1}>{2}</{0}>".format(
            tag, "".join(f' {k}="{v}"' for k, v in attrs.items()), "".join(kids)
        ),
        st.sampled_from(TAGS),
        st.dictionaries(st.sampled_from(ATTRS), attr_values, max_size=3),
        st.lists(children, max_size=3),
    )


xml_trees = st.recursive(
    st.sampled_from(
        [
            '<Text name="text" value="$text"/>',
            '<Label value="PER"/>',
            "",
            '<Labels name="label" toName="text"/>',
            '<Choice value="pos"/>',
        ]
    ),
    _element,
    max_leaves=8,
).map(lambda inner: f"<View>{inner}</View>")
XXE = [
    (
        '<!DOCTYPE v [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        '<View><Labels name="label" toName="text"><Label value="&x;"/></Labels><Text name="text" '
        'value="$text"/></View>'
    ),
    (
        '<!DOCTYPE v [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        '<View><Labels name="label" toName="&x;"><Label value="PER"/></Labels><Text name="text" '
        'value="$text"/></View>'
    ),
    '<!DOCTYPE v [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]><View/>',
    '<!DOCTYPE v SYSTEM "http://127.0.0.1:1/evil.dtd"><View><Text name="text" value="$text"/>'
    "</View>",
    '<?xml version="1.0" encoding="UTF-8"?><View><Text name="text" value="$text"/></View>',
    (
        '<View xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include href="file:///etc/passwd" '
        'parse="text"/>'
        '<Labels name="label" toName="text"><Label value="PER"/></Labels><Text name="text" '
        'value="$text"/></View>'
    ),
    (
        '<!DOCTYPE v [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        '<View><Labels name="label" toName="text"><Label value="&b;"/></Labels><Text name="text" '
        'value="$text"/></View>'
    ),
]
label_configs = st.one_of(
    st.sampled_from([NER_CONFIG, CLS_CONFIG, *XXE]),
    xml_trees,
    st.builds(
        lambda cut, junk: NER_CONFIG[:cut] + junk + NER_CONFIG[cut:],
        st.integers(0, len(NER_CONFIG)),
        st.text(max_size=8) | st.sampled_from(["<", ">", "&", '"', "]]>"]),
    ),
    st.text(max_size=40),
    json_values,
)

# Tasks: Label Studio's shape, with any part replaced by junk.
starts_ends = (
    st.integers(-5, 60) | ints | floats | st.sampled_from(["3", "x", None, [1], {"a": 1}, True])
)
region_values = st.fixed_dictionaries(
    {},
    optional={
        "start": starts_ends,
        "end": starts_ends,
        "text": texts,
        "labels": st.lists(st.sampled_from(["PER", "LOC", "XX", ""]) | json_values, max_size=3)
        | json_values,
        "choices": st.lists(st.sampled_from(["pos", "neg", "x"]) | json_values, max_size=3)
        | json_values,
    },
)
regions = (
    st.fixed_dictionaries(
        {},
        optional={
            "from_name": st.sampled_from(["label", "sentiment", "other"]) | json_values,
            "to_name": st.just("text"),
            "type": st.sampled_from(["labels", "choices"]),
            "value": region_values | json_values,
            "id": json_values,
        },
    )
    | json_values
)
annotations = (
    st.fixed_dictionaries(
        {},
        optional={
            "id": ints | texts,
            "result": st.lists(regions, max_size=3) | json_values,
            "was_cancelled": json_values,
            "ground_truth": st.booleans(),
        },
    )
    | json_values
)
task_ids = (
    ints
    | st.sampled_from(["../../../tmp/pwned", "$(touch /tmp/x)", "{{7*7}}", None, [1], {"id": 1}])
    | texts
)
task_texts = (
    st.sampled_from(TEXTS) | st.text(max_size=30) | st.sampled_from(SURROGATES) | json_values
)
tasks = st.fixed_dictionaries(
    {"id": task_ids},
    optional={
        "data": st.fixed_dictionaries({"text": task_texts}, optional={"meta": json_values})
        | json_values,
        "annotations": st.lists(annotations, max_size=2) | json_values,
        "predictions": json_values,
    },
)


@st.composite
def almost_valid_predict(draw):
    """A valid /predict body with some fields replaced by junk (or dropped)."""
    body = {
        "project": VALID_PREDICT["project"],
        "label_config": NER_CONFIG,
        "tasks": draw(st.lists(tasks, min_size=1, max_size=3)),
    }
    for key, junk in (
        ("project", st.sampled_from(BAD_PROJECTS) | json_values),
        ("label_config", label_configs),
        ("tasks", st.lists(tasks | json_values, max_size=3) | json_values),
    ):
        choice = draw(st.sampled_from(["keep", "keep", "keep", "replace", "drop"]))
        if choice == "replace":
            body[key] = draw(junk)
        elif choice == "drop":
            del body[key]
    if draw(st.booleans()):
        body.update(draw(junk_dicts))
    return body


# ----------------------------------------------------------------------------- checks

CASES: Counter = Counter()  # endpoint -> cases tried (in process)
CASES_SCORED: Counter = Counter()  # /predict cases answered 200 (through the scoring path)
SERVER_ERRORS: list = []


def check_response(status: int, raw: bytes, *, method: str, path: str, sent=None) -> None:
    """The invariants of every answer: no 5xx, errors are {"error": str}, /predict keeps order,
    /report is a whole page."""
    if status >= 500:
        SERVER_ERRORS.append((method, path, status, raw[:300]))
    assert status < 500, f"{method} {path} -> {status}: {raw[:500]!r}\nsent: {str(sent)[:1000]}"
    assert b"Traceback" not in raw
    if method == "HEAD":
        return  # no body
    if status >= 400:
        body = json.loads(raw)
        assert isinstance(body, dict) and isinstance(body.get("error"), str), (status, raw[:300])
    elif path.split("?")[0] == "/report" and status == 200:  # the page, over fuzzed scores
        assert raw.startswith(b"<!DOCTYPE html>") and raw.rstrip().endswith(b"</html>")
    elif 200 <= status < 300 and method != "OPTIONS":  # 3xx: werkzeug's redirect of "//x" to "/x"
        body = json.loads(raw)
        if path.startswith("/predict") and isinstance(sent, dict):
            assert len(body["results"]) == len(sent["tasks"])


def _endpoint(path: str) -> str:
    path = path.split("?", 1)[0]
    return path if path in ROUTES else "other paths"


# ----------------------------------------------------------------------------- in process


class Fuzz:
    """The app under test, and the one way every fuzz case calls it."""

    def __init__(self, app, version: str):
        self.app, self.client, self.version = app, app.test_client(), version

    def call(
        self,
        method: str,
        path: str,
        *,
        data: bytes | None = None,
        query: str | None = None,
        headers: dict | None = None,
        sent=None,
    ):
        headers = GOOD if headers is None else headers
        kwargs = {"headers": headers}
        if data is not None:
            kwargs.update(data=data, content_type="application/json")
        if query is not None:
            kwargs["query_string"] = query
        response = self.client.open(path, method=method, **kwargs)
        CASES[_endpoint(path)] += 1
        if _endpoint(path) == "/predict" and method == "POST" and response.status_code == 200:
            CASES_SCORED["in process"] += 1
        check_response(
            response.status_code, response.get_data(), method=method, path=path, sent=sent
        )
        return response

    def post_json(self, path: str, body):
        return self.call("POST", path, data=json.dumps(body).encode(), sent=body)

    def run(self, case, *, endpoints: set[str], min_cases: int, min_scored: int = 0) -> None:
        """Run the hypothesis test ``case``; assert it reached ``endpoints`` with at least
        ``min_cases`` cases (``min_scored`` of them /predict answers through the scout).

        Each test checks its own coverage, so the checks hold whatever ``-k`` selects."""
        cases_before, scored_before = CASES.copy(), CASES_SCORED["in process"]
        case()
        ran = CASES - cases_before
        assert sum(ran.values()) >= min_cases, ran
        assert endpoints <= set(ran), f"not reached: {endpoints - set(ran)}"
        assert CASES_SCORED["in process"] - scored_before >= min_scored
        self.assert_still_serving()

    def assert_still_serving(self):
        assert self.client.get("/health").status_code == 200
        response = self.client.post("/predict", json=VALID_PREDICT, headers=GOOD)
        assert response.status_code == 200, response.get_data()
        results = response.get_json()["results"]
        assert len(results) == 1 and results[0]["model_version"] == self.version
        assert 0.0 <= results[0]["score"] <= 1.0


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory, tiny_scout):
    model_dir = tmp_path_factory.mktemp("fuzz") / "models"
    version = publish_scout(model_dir, PROJECT, tiny_scout)
    app = create_app(
        Settings(
            model_dir=str(model_dir),
            basic_auth_user=USER,
            basic_auth_pass=PASSWORD,
            label_studio_url=f"http://127.0.0.1:{free_port()}",
            label_studio_api_key=API_KEY,
            **ENGINE,
        ),
        runner=FakeRunner(),
        selftest_runner=FakeRunner(),
    )
    fuzz = Fuzz(app, version)
    fuzz.assert_still_serving()  # and the scout is loaded before the first timed example
    yield fuzz
    fuzz.assert_still_serving()
    total = sum(CASES.values())
    print(
        f"\nfuzz: {total} cases, {len(SERVER_ERRORS)} server errors (in process; "
        f"{', '.join(f'{k} {v}' for k, v in sorted(CASES.items()))}; "
        f"{CASES_SCORED['in process']} /predict answered 200)"
    )


POSTS = ["/setup", "/predict", "/webhook", "/versions", "/selftest"]


def test_fuzz_any_json_to_every_endpoint(fuzz):
    @settings(RUN, max_examples=250)
    @given(path=st.sampled_from(POSTS), body=json_values | junk_dicts)
    def case(path, body):
        fuzz.post_json(path, body)

    fuzz.run(case, endpoints=set(POSTS), min_cases=250)


def test_fuzz_almost_valid_predict(fuzz):
    @settings(RUN, max_examples=350)
    @given(body=almost_valid_predict())
    def case(body):
        fuzz.post_json("/predict", body)

    fuzz.run(case, endpoints={"/predict"}, min_cases=350, min_scored=100)


def test_fuzz_setup_label_configs(fuzz):
    @settings(RUN, max_examples=200)
    @given(
        project=st.sampled_from(["1", "2.1700000000"]) | st.sampled_from(BAD_PROJECTS),
        schema=label_configs,
        extra=junk_dicts,
    )
    def case(project, schema, extra):
        body = {**extra, "project": project, "schema": schema}
        response = fuzz.post_json("/setup", body)
        assert b"root:" not in response.get_data()  # no /etc/passwd through an external entity

    fuzz.run(case, endpoints={"/setup"}, min_cases=200)


def test_fuzz_setup_extra_params(fuzz):
    """A connection's extra parameters (backend.config.project_settings) of any shape: a 200 or a
    400 whose message is in the status line as one line of ASCII (Label Studio shows only that)."""
    from backend.config.project_settings import ALIASES

    keys = st.sampled_from(sorted(ALIASES)) | st.text(max_size=8)
    values = json_values | st.sampled_from(["5", "0", "-1", "1e9", "probability", "on", "nan"])
    texts = st.lists(st.tuples(keys, st.text(max_size=8) | values.map(str)), max_size=4).map(
        lambda pairs: "\n".join(f"{k}={v}" for k, v in pairs)
    )
    extra_params = (
        json_values | st.dictionaries(keys, values, max_size=4) | texts | texts.map(json.dumps)
    )

    @settings(RUN, max_examples=200)
    @given(extra_params=extra_params)
    def case(extra_params):
        body = {"project": "3.1700000000", "schema": NER_CONFIG, "extra_params": extra_params}
        response = fuzz.post_json("/setup", body)
        assert response.status_code in (200, 400), response.get_data()
        reason = response.status.split(" ", 1)[1]
        assert reason.isascii() and "\n" not in reason and "\r" not in reason

    fuzz.run(case, endpoints={"/setup"}, min_cases=200)


def test_fuzz_webhook(fuzz):
    @settings(RUN, max_examples=150)
    @given(
        action=st.sampled_from(EVENTS) | json_values,
        project=st.sampled_from([{"id": 7}, {"id": 8, "title": "x"}, "7.1"])
        | st.sampled_from(BAD_PROJECTS),
        extra=junk_dicts,
    )
    def case(action, project, extra):
        fuzz.post_json("/webhook", {**extra, "action": action, "project": project})

    fuzz.run(case, endpoints={"/webhook"}, min_cases=150)


RAW = [
    b"",
    b"{",
    b"{not json",
    b"[1, 2]",
    b'"text"',
    b"null",
    b"\xff\xfe\x00",
    b'{"project": NaN}',
    b'{"project": 1e999, "tasks": []}',
    b'{"a": "\\ud800"}',
    b'{"project": 1' + b"1" * 5000 + b"}",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    b'{"project": 1, "project": "x"}',
    b"\xef\xbb\xbf{}",
    b"{}" * 1000,
    b"\x00" * 64,
    '{"tasks": ["ünïcödé"]}'.encode("utf-16"),
]


def test_fuzz_raw_bytes_as_json(fuzz):
    @settings(RUN, max_examples=150)
    @given(
        path=st.sampled_from(POSTS),
        data=st.sampled_from(RAW)
        | st.binary(max_size=200)
        | json_values.map(lambda v: json.dumps(v).encode()[:-1]),
    )  # truncated JSON
    def case(path, data):
        fuzz.call("POST", path, data=data)

    fuzz.run(case, endpoints=set(POSTS), min_cases=150)


GETS = ["/status", "/is_training", "/versions", "/report", "/report.json", "/health", "/"]
query_text = st.text(alphabet=string.printable + "éü١²🙂\x00", max_size=40).map(
    lambda q: urllib.parse.quote(q, safe="=&%+;/?")
)
queries = (
    st.dictionaries(
        st.sampled_from(["project", "project[]", "id", ""]) | st.text(max_size=5),
        st.sampled_from(BAD_PROJECTS).map(str) | texts,
        max_size=3,
    ).map(lambda d: urllib.parse.urlencode(d, errors="surrogatepass"))
    | st.sampled_from(
        [
            "project=1",
            "project=1&project=2",
            "project=%FF",
            "project=%zz",
            "project",
            "project=1%00",
            "project=%2e%2e%2f1",
            "project=" + "9" * 400,
            "&&&",
            "=",
            "project=1;project=2",
            "project=%E2%80%AE1",
        ]
    )
    | query_text
)


def test_fuzz_query_strings(fuzz):
    @settings(RUN, max_examples=200)
    @given(path=st.sampled_from(GETS), query=queries)
    def case(path, query):
        fuzz.call("GET", path, query=query)

    fuzz.run(case, endpoints=set(GETS), min_cases=200)


METHODS = [
    "GET",
    "POST",
    "PUT",
    "DELETE",
    "PATCH",
    "HEAD",
    "OPTIONS",
    "TRACE",
    "CONNECT",
    "PROPFIND",
]
paths = st.sampled_from(
    [
        "/",
        "/health",
        "/setup",
        "/predict",
        "/webhook",
        "/status",
        "/is_training",
        "/versions",
        "/predict/",
        "//predict",
        "/health/..",
        "/../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/static/x",
        "/predict%00",
        "/nope",
        "/" + "a" * 3000,
    ]
) | st.text(alphabet=string.ascii_letters + string.digits + "/._-%~é", max_size=30).map(
    lambda p: "/" + urllib.parse.quote(p, safe="/%")
)
auth_headers = st.sampled_from(
    [
        GOOD,
        GOOD,
        GOOD,
        {},
        {"Authorization": "Basic ÿÿ"},
        {"Authorization": f"Bearer {PASSWORD}"},
        {"Authorization": "Basic"},
        {"Authorization": f"basic {TOKEN}"},
    ]
) | st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=40).map(
    lambda h: {"Authorization": h}
)


def test_fuzz_methods_and_paths(fuzz):
    @settings(RUN, max_examples=200)
    @given(
        method=st.sampled_from(METHODS)
        | st.text(alphabet=string.ascii_uppercase, min_size=1, max_size=8),
        path=paths,
        headers=auth_headers,
        data=st.none()
        | st.sampled_from(RAW[:6])
        | json_values.map(lambda v: json.dumps(v).encode()),
    )
    def case(method, path, headers, data):
        fuzz.call(method, path, headers=headers, data=data)

    fuzz.run(case, endpoints={"other paths"}, min_cases=200)


def test_fuzz_no_server_error_in_process(fuzz):
    """Whatever ran in this process (any ``-k`` selection) answered without a 5xx."""
    assert SERVER_ERRORS == []
    fuzz.assert_still_serving()


# ----------------------------------------------------------------------------- real server


def _http(url: str, method: str, data: bytes | None, headers: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_fuzz_real_server(tmp_path, tiny_scout):
    """A few hundred cases over real HTTP against ``python _wsgi.py`` (werkzeug, threaded)."""
    model_dir = tmp_path / "models"
    version = publish_scout(model_dir, PROJECT, tiny_scout)
    env = {
        "BASIC_AUTH_USER": USER,
        "BASIC_AUTH_PASS": PASSWORD,
        "LABEL_STUDIO_API_KEY": API_KEY,
        "LABEL_STUDIO_URL": f"http://127.0.0.1:{free_port()}",
        "SRW_K": "3",
        "SRW_N": "10",
        "SRW_RETRAIN_AFTER": "3",
        "SRW_MIN_ANNOTATIONS": "1000",
        "MAX_REQUEST_MB": "1",
        "LOG_LEVEL": "INFO",
    }
    server = BackendServer(model_dir, env, tmp_path / "backend.log").start()
    counts: Counter = Counter()
    try:

        def send(method, path, data=None, headers=None, sent=None, query=None):
            url = server.url + path + (f"?{query}" if query is not None else "")
            status, raw = _http(url, method, data, GOOD if headers is None else headers)
            counts[_endpoint(path)] += 1
            if _endpoint(path) == "/predict" and method == "POST" and status == 200:
                CASES_SCORED["real server"] += 1
            check_response(status, raw, method=method, path=path, sent=sent)

        def still_serving():
            status, raw = _http(server.url + "/health", "GET", None, {})
            assert status == 200
            status, raw = _http(
                server.url + "/predict", "POST", json.dumps(VALID_PREDICT).encode(), GOOD
            )
            assert status == 200, raw
            assert json.loads(raw)["results"][0]["model_version"] == version

        still_serving()

        @settings(RUN, max_examples=150)
        @given(body=almost_valid_predict())
        def predict(body):
            send("POST", "/predict", json.dumps(body).encode(), sent=body)

        @settings(RUN, max_examples=120)
        @given(
            path=st.sampled_from(POSTS), body=json_values | junk_dicts | st.sampled_from(RAW[:12])
        )
        def posts(path, body):
            send("POST", path, body if isinstance(body, bytes) else json.dumps(body).encode())

        @settings(RUN, max_examples=80)
        @given(path=st.sampled_from(GETS), query=queries)
        def gets(path, query):
            send("GET", path, query=query)

        @settings(RUN, max_examples=60)
        @given(
            method=st.sampled_from(METHODS[:7]),
            path=paths,
            headers=auth_headers,
            data=st.none() | st.sampled_from(RAW[:6]),
        )
        def methods(method, path, headers, data):
            send(method, path, data, headers=headers)

        for run in (predict, posts, gets, methods):
            run()
        still_serving()
        assert server.proc.poll() is None, server.log()
        log = server.log_path.read_text(errors="replace")
        # server_error() logs every 500 as "ERROR backend.web.errors: <method> <path> failed".
        assert not re.search(r"ERROR backend\.errors: .* failed", log), server.log()
    finally:
        server.stop()
    total = sum(counts.values())
    print(
        f"\nfuzz: {total} cases, 0 server errors (real server over HTTP; "
        f"{', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}; "
        f"{CASES_SCORED['real server']} /predict answered 200)"
    )
    assert total >= 400
