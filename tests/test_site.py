"""The docs site as a reader's browser shows it: every page at 1280x800 and at
390x844 (a phone), in headless Chromium driven by Playwright.

Marked `browser` and left out of the default run (it needs a Chromium: Debian's
`chromium` package); run it with `python -m pytest -m browser`, as `.ci/run`
does. With `TREESPEC_BROWSER_REQUIRED=1` (set by `.ci/run`) a missing browser is
a failure, not a skip.

What it holds, on every page:

- at 1280 px no code or output box is wider than its frame, no heading either,
  and the whole left navigation fits the screen;
- at both widths no table scrolls sideways;
- at both widths no copy button covers a word of a code box, nor leaves an
  empty band above the box's first line, and code in a table cell breaks only
  between words or after a dot or a slash;
- at 390 px Home's example shows whole (its point sits at the right of its
  lines), no wrapped output box scrolls, no heading is wider than the screen
  or takes more than three lines, and no name in a table's first column is
  broken across lines.

And on the site: a query typed into the search box finds the page that
answers it first (or among the first three), e.g. `python -m treespec check`.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = ("chromium", "chromium-browser", "google-chrome")

#: What a page shows wrong, as a list of `{kind, where}` records. The kinds:
#: `box-overflow` (a code box scrolls sideways; `wraps` says whether it is a
#: wrapped output box), `copy-overlap` (the copy button over a word),
#: `copy-band` (the copy button's row above a code box, left empty beside it),
#: `heading-overflow`, `heading-lines`, `broken-name` (code in a table's first
#: column on two lines), `broken-word` (code in a table cell broken inside a
#: word), `table-overflow` (a table that scrolls sideways) and `nav-cut` (a left
#: navigation entry below the screen).
PROBE = """() => {
  const found = [];
  const where = (el) => (el.textContent || "").trim().split("\\n")[0].slice(0, 50);
  const words = (el) => {
    const rects = [];
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node; (node = walk.nextNode()); ) {
      for (const m of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        for (const r of range.getClientRects()) rects.push([r, m[0]]);
      }
    }
    return rects;
  };
  for (const pre of document.querySelectorAll(".md-content pre")) {
    const code = pre.querySelector(":scope > code");
    if (!code) continue;
    const box = pre.closest("[class*='language-']");
    const lang = box ? [...box.classList].find((c) => c.startsWith("language-")) : "";
    const wraps = getComputedStyle(code).whiteSpace.startsWith("pre-wrap");
    if (code.scrollWidth > code.clientWidth + 1) {
      found.push({kind: "box-overflow", where: where(code), lang, wraps,
                  home: !!document.querySelector("#treespec")});
    }
    const button = pre.querySelector(".md-code__button, .md-clipboard");
    if (!button) continue;
    const band = code.getBoundingClientRect().top - pre.getBoundingClientRect().top;
    if (band > 12) found.push({kind: "copy-band", where: where(code), band});
    const b = button.getBoundingClientRect();
    for (const [r, word] of words(code)) {
      const over = r.right > b.left && r.left < b.right;
      if (over && r.bottom > b.top && r.top < b.bottom) {
        found.push({kind: "copy-overlap", where: where(code) + " / " + word, lang});
        break;
      }
    }
  }
  const headings = ".md-content h1, .md-content h2, .md-content h3";
  for (const h of document.querySelectorAll(headings)) {
    const line = parseFloat(getComputedStyle(h).lineHeight);
    const lines = Math.round(h.getBoundingClientRect().height / line);
    if (lines > 3) found.push({kind: "heading-lines", where: where(h), lines});
    if (h.scrollWidth > h.clientWidth + 1) {
      found.push({kind: "heading-overflow", where: where(h)});
    }
  }
  // Where code in a table cell goes on to a next line: after which character.
  const breaks = (code) => {
    const after = [];
    let top = null;
    let before = "";
    const walk = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let node; (node = walk.nextNode()); ) {
      for (let i = 0; i < node.data.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rect = range.getClientRects()[0];
        if (rect && node.data[i] !== " ") {
          if (top !== null && rect.top > top + 1) after.push(before);
          top = rect.top;
        }
        before = node.data[i];
      }
    }
    return after;
  };
  for (const code of document.querySelectorAll(".md-content td code")) {
    if (code.closest("pre")) continue;  // a listing's lines, not a name
    const after = breaks(code);
    if (after.length && code.closest("td:first-child")) {
      found.push({kind: "broken-name", where: where(code)});
    } else if (after.some((c) => !" ./".includes(c))) {
      // Only between words, after a dot (`treespec.` / `value_and_grad`) or
      // after a slash of a path.
      found.push({kind: "broken-word", where: where(code)});
    }
  }
  for (const table of document.querySelectorAll(".md-content table")) {
    const frame = table.closest(".md-typeset__scrollwrap") || table.parentElement;
    if (frame.scrollWidth > frame.clientWidth + 1) {
      found.push({kind: "table-overflow", where: where(table)});
    }
  }
  const nav = document.querySelector(".md-sidebar--primary .md-sidebar__scrollwrap");
  if (nav && window.innerWidth >= 1220) {  // a drawer below 76.25em
    const bottom = nav.getBoundingClientRect().bottom;
    for (const link of nav.querySelectorAll(".md-nav__link")) {
      const r = link.getBoundingClientRect();
      // An entry of a folded section is laid out but not shown: no cut.
      const shown = getComputedStyle(link).visibility === "visible";
      if (shown && r.height > 0 && link.offsetParent && r.bottom > bottom + 1) {
        found.push({kind: "nav-cut", where: where(link)});
      }
    }
  }
  return found;
}"""

#: What each width may not show. At 390 px code boxes scroll sideways (their
#: lines are held to 76 characters, for 1280 px), except Home's example and
#: wrapped output; the left navigation is a drawer there.
FORBIDDEN = {
    1280: lambda p: p["kind"] != "heading-lines",
    390: lambda p: p["kind"] != "box-overflow" or p["home"] or p["wraps"],
}


def _chromium() -> str | None:
    found = [shutil.which(name) for name in CHROMIUM]
    return next((path for path in found if path), None)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        executable = None
    if executable is None:
        if os.environ.get("TREESPEC_BROWSER_REQUIRED"):
            pytest.fail("no Chromium or no playwright: `apt-get install chromium`")
        pytest.skip("no Chromium (Debian's `chromium` package) or no playwright")
    flags = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    flags += ["--disable-component-update", "--disable-sync", "--no-first-run"]
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=flags)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The docs built (strict) and served on localhost: the root URL."""
    folder = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"]
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run(
        [*command, "--site-dir", str(folder)], cwd=ROOT, env=environment, check=True
    )
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _pages() -> list[str]:
    """Every page of the site's navigation, as its URL below the root."""
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("", lambda loader, tag, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)

    def walk(entries: list[Any]) -> Iterator[str]:
        for entry in entries:
            (target,) = entry.values()
            if isinstance(target, list):
                yield from walk(target)
            else:
                yield (target.removesuffix(".md") + "/").removesuffix("index/")

    return list(walk(config["nav"]))


#: The screens: a laptop's, and a phone's (an iPhone 14's CSS pixels).
HEIGHT = {1280: 800, 390: 844}


def _problems(browser: Any, url: str, width: int, **options: Any) -> list[Any]:
    viewport = {"width": width, "height": HEIGHT[width]}
    page = browser.new_page(viewport=viewport, **options)
    try:
        page.goto(url)
        if page.query_selector(".md-content pre > code"):
            # The theme adds the copy buttons once its script has run.
            page.wait_for_selector(".md-code__button", state="attached")
        found: list[Any] = page.evaluate(PROBE)
    finally:
        page.close()
    return found


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("path", _pages())
def test_the_page_shows_whole(browser: Any, site: str, path: str, width: int) -> None:
    problems = _problems(browser, site + path, width)
    wrong = [p for p in problems if FORBIDDEN[width](p)]
    assert wrong == [], f"/{path} at {width} px"


def test_the_dark_scheme_shows_the_same(browser: Any, site: str) -> None:
    problems = _problems(browser, site + "tutorial/", 1280, color_scheme="dark")
    assert [p for p in problems if FORBIDDEN[1280](p)] == []


def test_the_probe_finds_what_it_looks_for(browser: Any) -> None:
    """A page with each fault: the probe reports each, so a pass means none."""
    long = "x" * 400
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.set_content(
            f"""<div class="md-content">
            <div class="language-python"><pre style="position: relative">
            <nav><button class="md-code__button"
              style="position: absolute; top: 0; left: 0; width: 40px; height: 40px">
            </button></nav><code style="display: block; overflow: auto; width: 300px;
              white-space: pre">covered {long}</code></pre></div>
            <h2 style="width: 100px; white-space: nowrap; overflow: hidden">{long}</h2>
            <table><tr><td style="width: 30px"><code>Static[T] Static[T]</code></td>
            <td style="width: 60px"><code style="word-break: break-all"
              >treespec.value_and_grad</code></td></tr></table>
            <div class="language-python"><pre>
            <nav style="height: 40px"><button class="md-code__button"></button></nav
            ><code>a</code></pre></div>
            <div style="width: 50px; overflow: auto"><table><tr><td>{long}</td></tr>
            </table></div></div>"""
        )
        found = {p["kind"]: p for p in page.evaluate(PROBE)}
    finally:
        page.close()
    kinds = {"box-overflow", "copy-overlap", "heading-overflow", "broken-name"}
    kinds |= {"table-overflow", "copy-band", "broken-word"}
    assert set(found) == kinds
    assert found["copy-overlap"]["where"].endswith("/ covered")
    assert not found["box-overflow"]["wraps"] and found["box-overflow"]["lang"]


#: What a reader types into the site's search box, the pages one of which must
#: be among the first results, and how many results from the top it may be.
SEARCHES = [
    ("check", {"shapes/"}, 1),
    ("python -m treespec check", {"shapes/"}, 1),
    ("retrace", {"faq/", "transforms/jit/"}, 3),
    ("donate", {"faq/", "transforms/jit/"}, 3),
    ("mypy", {"static-checking/"}, 1),
    # A reader's words for what a page answers (issue 57): the page that
    # answers first, never a script shown whole (Examples leaves them out).
    ("TPU", {"performance/", "getting-started/"}, 1),
    ("recompile", {"faq/"}, 1),
    ("filter_grad", {"migration/equinox/"}, 1),
    ("explain", {"getting-started/"}, 1),
]

#: The pages the search box lists, in order, once its list stops changing.
RESULTS = """() => [...document.querySelectorAll("li.md-search-result__item")]
  .map((item) => item.querySelector("a").getAttribute("href"))"""


def _search(browser: Any, site: str, query: str) -> list[str]:
    """The pages the site's own search box ranks for `query`, best first."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(site)
        box = page.locator("input.md-search__input")
        box.click()
        box.press_sequentially(query, delay=20)
        page.wait_for_selector("li.md-search-result__item")
        found: list[str] = []
        for _ in range(50):  # the worker answers each keystroke: wait for the last
            page.wait_for_timeout(200)
            now = page.evaluate(RESULTS)
            if now == found:
                break
            found = now
    finally:
        page.close()
    return [href.removeprefix(site) for href in found]


@pytest.mark.parametrize(("query", "wanted", "within"), SEARCHES)
def test_the_search_box_ranks_the_page_that_answers(
    browser: Any, site: str, query: str, wanted: set[str], within: int
) -> None:
    ranked = _search(browser, site, query)
    assert wanted & set(ranked[:within]), (query, ranked[:5])


#: What the copy button of each output block (`text`, `output`) copies, as
#: Material takes it: the code marked `data-md-copying`, its innerText read.
COPIED = """() => [...document.querySelectorAll(
    ".language-text pre > code, .language-output pre > code")].map((code) => {
  code.setAttribute("data-md-copying", "");
  const copied = code.innerText;
  code.removeAttribute("data-md-copying");
  return [copied.trimEnd(), code.textContent.trimEnd()];
})"""


@pytest.mark.parametrize("path", ["tutorial/", "getting-started/", "validation/"])
def test_the_copy_button_copies_an_output_block_line_for_line(
    browser: Any, site: str, path: str
) -> None:
    # Each line of an output block is a block of its own (wrapped lines hang
    # indented): the copy is still the block's lines, no blank line between.
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(site + path)
        blocks = page.evaluate(COPIED)
    finally:
        page.close()
    several = [(copied, text) for copied, text in blocks if "\n" in text]
    assert several, path
    for copied, text in several:
        assert copied == text, (path, copied[:200])
