"""The browser's words about the verdict are the server's: static/js/verdict_words.js is generated from
search/engine/verdict_words.py and must be current, and the browser modules that show the verdict (speed.js,
run_page.js) hold no copy of those words of their own. Read from the sources; nothing runs in a browser here."""

from __future__ import annotations

import json
import re

from search.engine import verdict_words as words
from search.engine.node import FREE_VERDICTS
from search.engine.verdict_words_js import CONSTANTS, JS_FILE, main, render
from stark_web.studio.pages import speed

JS = JS_FILE.parent


def test_the_generated_js_module_is_current() -> None:
    assert JS_FILE.read_text() == render(), "run `python -m search.engine.verdict_words_js`"
    assert main(["--check"]) == 0


def test_the_js_module_holds_every_python_word() -> None:
    text = JS_FILE.read_text()
    for name in CONSTANTS:
        found = re.search(rf"^export const {name} = (.*);$", text, re.M)
        assert found, f"{JS_FILE.name} has no {name}"
        assert json.loads(found.group(1)) == json.loads(json.dumps(getattr(words, name))), name
    assert json.loads(re.search(r"FREE_VERDICTS = (\[.*?\]);", text).group(1)) == list(FREE_VERDICTS) \
        == list(words.FREE_WORDS)


def test_a_python_word_changed_alone_is_caught(monkeypatch) -> None:
    monkeypatch.setattr(words, "TIE_NOTE", "a draw with {tied}")
    assert render() != JS_FILE.read_text()
    assert main(["--check"]) == 1


def test_the_browser_modules_keep_no_copy_of_the_words() -> None:
    """Every sentence of the words module, and each template's fixed text, appears in the browser's code only in the
    generated file."""
    phrases: list[str] = []
    for name in CONSTANTS:
        value = getattr(words, name)
        items = value.values() if isinstance(value, dict) else [value] if isinstance(value, str) else \
            [m["title"] for m in value]
        phrases += [p for v in items for p in re.split(r"\{\w+\}", v) if len(p.strip()) > 15]
    for module in ("speed.js", "run_page.js"):
        source = re.sub(r"(^|\s)//.*$", "", (JS / module).read_text(), flags=re.M)  # code, not comments
        copies = [p for p in phrases if p.strip() in source]
        assert not copies, f"static/js/{module} keeps its own copy of {copies}: import it from verdict_words.js"


def test_the_pages_say_what_the_words_module_says() -> None:
    assert speed.CLASS_WORDS is words.CLASS_WORDS and speed.SETTLING_WHY == words.SETTLING_WHY
    assert speed.settling_text([{"node": 3, "state": "queued"}]) == "Settling: re-timing #3 (queued)"
    assert speed.settling_text([]) == "Settling: the verdict is being settled"
    assert speed.tie_title({"tie_with": 7}) == \
        "cannot be told apart from #7 beyond the noise of both figures: a tie"
    assert speed.tie_note([{"id": 9, "tie_with": 7}, {"id": 4, "tie_with": 7}], 7) == \
        "a tie with #9 and #4: cannot be told apart beyond the noise"
    marks = speed.marks({"unstable": True, "why": "busy host", "reused": True, "class": "custom_kernel"})
    assert [(m["key"], m["text"]) for m in marks] == [("unstable", "unstable"), ("reused", "reused"),
                                                      ("class", "custom kernel")]
    assert marks[0]["title"] == "busy host; re-time it before trusting this number"
    assert marks[2]["title"] == f"class of win: {words.CLASS_WHY['custom_kernel']}"
