"""Headless Chromium for report tests: load a file:// page, return its DOM after scripts ran.

Skips with a reason when no Chromium is installed, unless CRASHCERT_REQUIRE_CHROMIUM=1
(CI), where a missing browser is a failure.
"""

from __future__ import annotations

import html.parser
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
DUMP_TIMEOUT_S = 60


def find() -> str:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    reason = "Chromium not installed (apt-get install -y chromium)"
    if os.environ.get("CRASHCERT_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"{reason}, and CRASHCERT_REQUIRE_CHROMIUM=1")
    pytest.skip(reason)


def dump_dom(page: pathlib.Path) -> str:
    """The serialized DOM of `page` once loaded (inline scripts have run)."""
    binary = find()
    with tempfile.TemporaryDirectory(prefix="crashcert-chromium-") as profile:
        done = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=DUMP_TIMEOUT_S,
            check=False,
        )
    if done.returncode != 0 or "<html" not in done.stdout:
        raise AssertionError(f"chromium failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Element | None) -> None:
        self.tag = tag
        self.attrs = attrs
        self.parent = parent
        self.children: list[Element] = []
        self.text = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def has(self, *classes: str) -> bool:
        return set(classes) <= self.classes

    def all_text(self) -> str:
        return self.text + "".join(child.all_text() for child in self.children)

    def walk(self) -> list[Element]:
        found = [self]
        for child in self.children:
            found += child.walk()
        return found

    def find(self, tag: str | None = None, *classes: str, **attrs: str) -> list[Element]:
        """Descendants (and self) by tag, classes and attributes (data_x -> data-x)."""
        wanted = {key.replace("_", "-"): value for key, value in attrs.items()}
        return [
            node
            for node in self.walk()
            if (tag is None or node.tag == tag)
            and node.has(*classes)
            and all(node.attrs.get(key) == value for key, value in wanted.items())
        ]


VOID = {"meta", "link", "br", "img", "input", "hr", "col", "area", "base", "source", "wbr"}


class _Builder(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Element(tag, {key: value or "" for key, value in attrs}, self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Element(tag, {key: value or "" for key, value in attrs}, self.current)
        self.current.children.append(node)

    def handle_endtag(self, tag: str) -> None:
        node: Element | None = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data: str) -> None:
        self.current.text += data


def parse(document: str) -> Element:
    builder = _Builder()
    builder.feed(document)
    builder.close()
    return builder.root
