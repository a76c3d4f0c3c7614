"""The review control command (backend/labelstudio/review_control.py): the config transformation,
and the command with a stand-in for Label Studio (tests/labelstudio/test_review_control_command.py
runs it against a real one); the docs show the snippet the backend writes."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET

import pytest

from backend.labelstudio import review_control
from backend.labelstudio.client import LabelStudioUnavailable
from backend.labelstudio.review_control import ConfigRefused, add_review_control, has_review_control
from backend.labelstudio.tasks import parse_label_config
from subregweigh.io.labelstudio import REVIEW_CHOICES, REVIEW_CONTROL, review_control_xml
from testbed.projects import CLS_CONFIG, NER_CONFIG
from tests.paths import REPO

INDENTED = """<View>
  <Header value="Tag the entities"/>
  <!-- the project's labels -->
  <Labels name="label" toName="text">
    <Label value="PER"/>
    <Label value="LOC"/>
  </Labels>
  <Text name="text" value="$text"/>
</View>
"""


def _control(config: str) -> ET.Element:
    root = ET.fromstring(config)
    (control,) = [c for c in root if c.get("name") == REVIEW_CONTROL]  # a child of the root
    return control


@pytest.mark.parametrize("config", [NER_CONFIG, CLS_CONFIG, INDENTED])
def test_the_control_is_added_inside_the_root_view_on_the_text(config):
    new = add_review_control(config)
    control = _control(new)
    assert control.tag == "Choices" and control.get("toName") == "text"
    assert [c.get("value") for c in control] == list(REVIEW_CHOICES)
    # Only the snippet was added: the config as written stays, character for character.
    snippet = review_control_xml("text")
    assert snippet in new
    assert "".join(line for line in new.replace(snippet, "").split("\n") if line.strip()) == (
        "".join(line for line in config.split("\n") if line.strip())
    )
    assert has_review_control(new) and not has_review_control(config)


def test_an_indented_config_gets_the_snippet_on_a_line_of_its_own():
    new = add_review_control(INDENTED)
    lines = new.split("\n")
    at = lines.index("  " + review_control_xml("text"))
    assert lines[at - 1] == '  <Text name="text" value="$text"/>' and lines[at + 1] == "</View>"
    assert new.endswith("</View>\n")


def test_a_single_line_config_stays_on_one_line():
    new = add_review_control(NER_CONFIG)
    assert "\n" not in new and new.endswith(review_control_xml("text") + "</View>")


def test_the_control_names_the_text_it_sits_by_even_in_a_nested_view():
    config = (
        '<View><View style="padding: 4px"><Text name="sentence" value="$s"/></View>'
        '<Choices name="topic" toName="sentence"><Choice value="a"/><Choice value="b"/>'
        "</Choices></View>"
    )
    control = _control(add_review_control(config))
    assert control.get("toName") == "sentence"


@pytest.mark.parametrize(
    ("config", "why"),
    [
        (add_review_control(NER_CONFIG), "already has the review control"),
        (  # the reserved name on anything counts as taken
            NER_CONFIG.replace("</View>", f'<Header name="{REVIEW_CONTROL}" value="x"/></View>'),
            "already has the review control",
        ),
        (
            NER_CONFIG.replace("</View>", '<Text name="other" value="$other"/></View>'),
            "2 <Text> elements",
        ),
        ('<View><Image name="img" value="$image"/></View>', "0 <Text> elements"),
        ('<View><Text value="$text"/></View>', "<Text> has no name"),
        ('<Page><Text name="text" value="$text"/></Page>', "root is <Page>, not <View>"),
        ("<View><Text name='text' value='$text'></View>", "not well-formed XML"),
    ],
)
def test_a_config_that_cannot_take_the_control_is_refused(config, why):
    with pytest.raises(ConfigRefused, match=why):
        add_review_control(config)


@pytest.mark.parametrize("config", [NER_CONFIG, CLS_CONFIG])
def test_the_backend_reads_the_project_as_before_with_the_control(config):
    """The control is not a label: the project's spec is what it was without it, and names the
    control."""
    spec = parse_label_config(add_review_control(config))
    assert spec.review == REVIEW_CONTROL
    assert dataclasses.replace(spec, review=None) == parse_label_config(config)


class FakeLabelStudio:
    """What the command asks of Label Studio: one project's config, kept in ``configs``."""

    configs: dict[int, str] = {}
    saved: list[tuple[int, str]] = []
    refuse: str | None = None

    def __init__(self, url, api_key, retries=4, **kw):
        assert (url, api_key) == ("http://ls.example", "secret-token")

    def label_config(self, project):
        if project not in self.configs:
            raise LabelStudioUnavailable(f"Label Studio refused to read project {project}: 404")
        return self.configs[project]

    def set_label_config(self, project, config):
        if self.refuse:
            raise LabelStudioUnavailable(self.refuse)
        self.saved.append((project, config))
        self.configs[project] = config


@pytest.fixture
def fake_ls(monkeypatch):
    monkeypatch.setenv("LABEL_STUDIO_URL", "http://ls.example")
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "secret-token")
    fake = type("Fake", (FakeLabelStudio,), {"configs": {3: NER_CONFIG}, "saved": []})
    monkeypatch.setattr(review_control, "LabelStudioAPI", fake)
    return fake


def test_without_apply_the_command_only_shows(fake_ls, capsys):
    assert review_control.main(["3"]) == 0
    out = capsys.readouterr().out
    assert NER_CONFIG in out and add_review_control(NER_CONFIG) in out
    assert "Nothing was changed" in out and "--apply" in out
    assert fake_ls.saved == [] and fake_ls.configs[3] == NER_CONFIG


def test_with_apply_the_command_saves_the_config_with_the_control(fake_ls, capsys):
    assert review_control.main(["3", "--apply"]) == 0
    assert fake_ls.saved == [(3, add_review_control(NER_CONFIG))]
    assert "Saved" in capsys.readouterr().out
    # a second run finds it there and refuses, changing nothing
    assert review_control.main(["3", "--apply"]) == 2
    assert "already has the review control" in capsys.readouterr().err
    assert len(fake_ls.saved) == 1


@pytest.mark.parametrize(
    ("args", "setup", "why"),
    [
        (["9"], {}, "refused to read project 9"),
        (["3", "--apply"], {"refuse": "Label Studio refused to change it: HTTP 400"}, "HTTP 400"),
        (["3"], {"configs": {3: '<View><Image name="i" value="$i"/></View>'}}, "0 <Text>"),
    ],
)
def test_a_refusal_is_a_message_and_status_2(fake_ls, capsys, args, setup, why):
    for name, value in setup.items():
        setattr(fake_ls, name, value)
    assert review_control.main(args) == 2
    err = capsys.readouterr().err
    assert why in err and "refused" in err and "Traceback" not in err
    assert fake_ls.saved == []


def test_without_label_studio_settings_the_command_says_so(monkeypatch, capsys):
    for name in ("LABEL_STUDIO_URL", "LABEL_STUDIO_API_KEY", "LABEL_STUDIO_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("LABEL_STUDIO_ACCESS_TOKEN", raising=False)
    assert review_control.main(["3"]) == 2
    assert "LABEL_STUDIO_URL" in capsys.readouterr().err


def test_the_docs_show_the_snippet_and_the_command_the_backend_has():
    page = (REPO / "docs" / "label-studio.md").read_text()
    section = page.split("### One-click review\n", 1)[1].split("\n### ", 1)[0]
    (snippet,) = re.findall(r"```xml\n(.*?)\n```", section, re.S)
    assert snippet == review_control_xml("text")
    assert "python -m backend.labelstudio.review_control <project id> --apply" in section
    assert all(f"**{choice}**" in section for choice in REVIEW_CHOICES)
    assert (REPO / "docs" / "img" / "review-control.png").exists()
