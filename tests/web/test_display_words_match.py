"""The browser's copy of the display words (static/js/speed.js) says what the server's (stark_web/studio/pages/speed.py)
says: the classes of win and their reasons, the free attempts, a settling run's headline, the tie marks. Read from the
JS source, compared to the Python values; nothing runs in a browser here."""

from __future__ import annotations

import json
import re
from pathlib import Path

from search.engine.node import FREE_VERDICTS
from stark_web.studio.pages import speed

JS = (Path(__file__).resolve().parents[2] / "static" / "js" / "speed.js").read_text()


def js_object(name: str) -> dict[str, str]:
    body = re.search(rf"const {name} = \{{(.*?)\}};", JS, re.S)
    assert body, f"static/js/speed.js has no {name}"
    return {k: v for k, v in re.findall(r'(\w+): "([^"]*)"', body.group(1))}


def test_the_js_words_are_the_pythons() -> None:
    assert js_object("CLASS_WORDS") == {k: v for k, v in speed.CLASS_WORDS.items() if k != "reference"}
    assert js_object("CLASS_WHY") == speed.CLASS_WHY
    assert js_object("FREE_WORDS") == speed.FREE_WORDS
    free = json.loads(re.search(r"FREE_VERDICTS = (\[.*?\]);", JS).group(1))
    assert free == list(FREE_VERDICTS) == list(speed.FREE_WORDS)
    assert re.search(r'SETTLING_WHY = "([^"]*)"', JS).group(1) == speed.SETTLING_WHY
    assert "Settling: re-timing " in JS and speed.settling_text([{"node": 3, "state": "queued"}]) == \
        "Settling: re-timing #3 (queued)"
    assert 'return "Settling: the verdict is being settled"' in JS and speed.settling_text([]) == \
        "Settling: the verdict is being settled"
    tie = speed.tie_title({"tie_with": 7})
    assert tie.replace("#7", "#${entry.tie_with}") in JS, tie
    note = speed.tie_note([{"id": 9, "tie_with": 7}], 7)
    assert note == "a tie with #9: cannot be told apart beyond the noise"
    assert "`a tie with ${tied.join(\" and \")}: cannot be told apart beyond the noise`" in JS
