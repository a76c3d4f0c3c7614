"""Add the one-click review control to a project's labeling config, on the lead's request.

Usage::

    LABEL_STUDIO_URL=... LABEL_STUDIO_API_KEY=... python -m backend.labelstudio.review_control 4
    LABEL_STUDIO_URL=... LABEL_STUDIO_API_KEY=... python -m backend.labelstudio.review_control 4
    --apply

The review control is a ``<Choices>`` named :data:`subregweigh.io.labelstudio.REVIEW_CONTROL`
(the snippet :func:`subregweigh.io.labelstudio.review_control_xml` writes) on the config's one
``<Text>``: with it in the config, one click on *correct*, *wrong (fixed)* or *unsure* and
Update decide a task (docs/label-studio.md, "One-click review"). The command reads the project's
labeling config through Label Studio's API (``LABEL_STUDIO_URL`` and ``LABEL_STUDIO_API_KEY``,
read as the backend reads them), prints it, and prints it again with the control added inside
the root ``<View>`` (:func:`add_review_control`). Only with ``--apply`` does it save the new
config to the project; without, it changes nothing. The backend itself never changes a config.

It refuses, with the reason and exit status 2, a config that already has the control, one
without a single ``<Text>``, a root other than ``<View>``, and whatever Label Studio refuses
(an unknown project, a token without access, a config it does not accept); then nothing is
changed. Exit status 0: shown, or saved.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET

from backend.config.settings import Settings, SettingsError
from backend.labelstudio.client import LabelStudioAPI, LabelStudioUnavailable
from subregweigh.io.labelstudio import REVIEW_CONTROL, review_control_xml

PROG = "python -m backend.labelstudio.review_control"
REFUSED = 2
# A CLI run waits for Label Studio a few seconds, not the backend's minutes of backoff.
RETRIES = 1


class ConfigRefused(ValueError):
    """The labeling config cannot take the review control (the message says why)."""


def _parse(config: str) -> ET.Element:
    try:
        return ET.fromstring(config.strip())
    except ET.ParseError as err:
        raise ConfigRefused(f"the labeling config is not well-formed XML ({err})") from None


def has_review_control(config: str) -> bool:
    """Whether ``config`` has an element named :data:`REVIEW_CONTROL` (the control, or
    something else under its reserved name)."""
    return any(el.get("name") == REVIEW_CONTROL for el in _parse(config).iter())


def _indent(line_start: str) -> str:
    """The whitespace that begins ``line_start``."""
    return line_start[: len(line_start) - len(line_start.lstrip(" \t"))]


def add_review_control(config: str) -> str:
    """``config`` with the review control as the last child of its root ``<View>``.

    The snippet is :func:`review_control_xml` of the config's one ``<Text>``; the rest of the
    config is kept as written (its order, comments and indentation; the snippet takes the
    indentation of the root's children). Raises :class:`ConfigRefused` when the config already
    has an element named :data:`REVIEW_CONTROL`, when its root is not ``<View>``, or when it
    does not have exactly one ``<Text>`` with a name.
    """
    root = _parse(config)
    if root.tag != "View":
        raise ConfigRefused(f"the labeling config's root is <{root.tag}>, not <View>")
    if any(el.get("name") == REVIEW_CONTROL for el in root.iter()):
        raise ConfigRefused(
            f'the labeling config already has the review control (name="{REVIEW_CONTROL}"); '
            "nothing to add"
        )
    texts = list(root.iter("Text"))
    if len(texts) != 1:
        raise ConfigRefused(
            f"the labeling config has {len(texts)} <Text> elements; the review control goes "
            "on a config with exactly one"
        )
    name = texts[0].get("name")
    if not name:
        raise ConfigRefused("the labeling config's <Text> has no name for the control to point to")
    snippet = review_control_xml(name)

    # The root's closing tag is the last </View>; the check at the end refuses a misplacement.
    closing = [m.start() for m in re.finditer(r"</View\s*>", config)]
    if not closing:
        raise ConfigRefused("the labeling config's root <View> has no closing tag")
    at = closing[-1]
    before, after = config[:at], config[at:]
    if "\n" in before.rstrip():
        # multi-line: the snippet on lines of its own, indented as the root's first child
        last_line = before.rsplit("\n", 1)[1]
        closing_indent = "" if last_line.strip() else last_line
        opening = re.search(r"<View\b[^>]*>", before)
        body = before[opening.end() :] if opening else ""
        children = [line for line in body.split("\n") if line.strip()]
        child = _indent(children[0]) if children else ""
        if len(child) <= len(closing_indent):
            child = closing_indent + "  "
        lines = "".join(f"{child}{line}\n" for line in snippet.strip().split("\n"))
        stem = before.rstrip(" \t")
        new = stem + ("" if stem.endswith("\n") else "\n") + lines + closing_indent + after
    else:
        new = before + snippet.strip() + after
    placed = _parse(new)
    if not any(child.get("name") == REVIEW_CONTROL for child in placed):
        raise ConfigRefused("could not place the review control inside the root <View>")
    return new


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Show a project's labeling config with the one-click review control "
        "added; save it to the project only with --apply.",
    )
    parser.add_argument("project", type=int, help="the Label Studio project id")
    parser.add_argument(
        "--apply",
        action="store_true",
        help="save the config with the control to the project (without: only show it)",
    )
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        api = LabelStudioAPI(
            settings.label_studio_url, settings.label_studio_api_key, retries=RETRIES
        )
        before = api.label_config(args.project)
        print(f"The labeling config of project {args.project} now:\n\n{before.strip()}\n")
        after = add_review_control(before)
        print(f"With the review control ({REVIEW_CONTROL}):\n\n{after.strip()}\n")
        if not args.apply:
            print(
                f"Nothing was changed. To save this config to project {args.project}, run:\n"
                f"    {PROG} {args.project} --apply"
            )
            return 0
        api.set_label_config(args.project, after)
        saved = api.label_config(args.project)
        if not has_review_control(saved):
            raise ConfigRefused(
                f"Label Studio answered the change but project {args.project}'s config has no "
                "review control"
            )
        print(
            f"Saved: project {args.project} has the review control. In the labeling view, "
            "click one of its choices and Update to decide a task."
        )
        return 0
    except (SettingsError, LabelStudioUnavailable, ConfigRefused) as err:
        print(f"{PROG}: refused: {err}", file=sys.stderr)
        return REFUSED


if __name__ == "__main__":
    sys.exit(main())
