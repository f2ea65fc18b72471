"""MkDocs hooks: the version in the footer, aligned output that wraps under
its own column, and a site without a host.

The version is written once, in treespec/__init__.py (the package build reads
it from there too), so the site cannot show another.

The site has no `site_url` (no public host yet: see mkdocs.yml), so its links
are relative and it works from any path. Two things need an absolute URL:
the sitemap (its entries must be absolute URLs), which is removed, and the
404 page, which a server shows at whatever path was missed, so that its
relative links would point below that path. Its links are written from the
site's root (`/...`) and a small script finds the root where the site is
served and rewrites them: it asks each parent folder of the missed path for
the site's search index, and the first that has it is the root.

An aligned output block (```output: `treespec.explain`'s columns) gets the
column where its last column starts, so that docs/stylesheets/extra.css can
wrap a long line under that column rather than cut it at the box's edge.
"""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any


def version(root: Path) -> str:
    """`__version__` of treespec/__init__.py, read without importing it."""
    text = (root / "treespec" / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"$', text, flags=re.M)
    if found is None:
        raise ValueError("treespec/__init__.py sets no __version__")
    return found.group(1)


def on_config(config: Any) -> Any:
    root = Path(config.config_file_path).parent
    config.copyright = f"treespec {version(root)} · Apache-2.0"
    return config


#: An output block (```output) and its first code element.
_OUTPUT = re.compile(
    r'(<div class="language-output highlight"><pre>.*?<code)(.*?</code>)', re.S
)


def on_page_content(html: str, **kwargs: Any) -> str:
    """Each aligned output block (```output: `treespec.explain`'s columns) says
    where its last column starts, as `--hang` on its code element: a long line
    wraps there (docs/stylesheets/extra.css), under its own column. And a
    dotted name in a table cell may break after a dot (`treespec.` /
    `value_and_grad`), code in a cell also between words and after a slash of
    a path, and nowhere else."""
    html = _OUTPUT.sub(_hang, html)
    return _TABLE.sub(lambda table: _ROW.sub(_dotted, table.group(0)), html)


#: A Markdown table (a code listing's table has a class), a row, its cells,
#: tags, code, and a dot that a name goes on after.
_TABLE = re.compile(r"<table>.*?</table>", re.S)
_ROW = re.compile(r"<tr\b[^>]*>.*?</tr>", re.S)
_CELL = re.compile(r"(<td\b[^>]*>)(.*?)(</td>)", re.S)
_TAG = re.compile(r"(<code>[^<]*</code>|<[^>]+>)")
_NAME_DOT = re.compile(r"\.(?=[A-Za-z_])")
_PATH_SLASH = re.compile(r"/(?=[A-Za-z_])")


def _dotted(row: re.Match[str]) -> str:
    """The row with a <wbr> after each dot of a dotted name, in text and in
    code, and after each space and slash in code: code does not break elsewhere
    (docs/stylesheets/extra.css). A first column's code does not break."""
    first = True

    def cell(found: re.Match[str]) -> str:
        nonlocal first
        parts = _TAG.split(found.group(2))
        for index, part in enumerate(parts):
            if index % 2 == 0:
                parts[index] = _NAME_DOT.sub(".<wbr>", part)
            elif part.startswith("<code>") and not first:
                text = part[len("<code>") : -len("</code>")]
                text = _PATH_SLASH.sub("/<wbr>", _NAME_DOT.sub(".<wbr>", text))
                parts[index] = "<code>" + text.replace(" ", " <wbr>") + "</code>"
        first = False
        return found.group(1) + "".join(parts) + found.group(3)

    return _CELL.sub(cell, row.group(0))


def _hang(found: re.Match[str]) -> str:
    text = unescape(re.sub(r"<[^>]+>", "", found.group(2)))
    columns = [line.find(" <- ") for line in text.splitlines()]
    column = max((c for c in columns if c >= 0), default=-1)
    if column < 0:
        return found.group(0)
    return f'{found.group(1)} style="--hang: {column + 4}ch"{found.group(2)}'


def on_post_build(config: Any) -> None:
    site = Path(config.site_dir)
    for name in ("sitemap.xml", "sitemap.xml.gz"):
        (site / name).unlink(missing_ok=True)
    index = site / "search" / "search_index.json"
    if index.exists():
        index.write_text(_flag_safe(index.read_text()))
    not_found = site / "404.html"
    if not_found.exists():
        not_found.write_text(_rooted(not_found.read_text()))


#: Joins a one-letter word to what follows it, unseen (U+2060 WORD JOINER).
_JOINER = "\u2060"


def _flag_safe(text: str) -> str:
    """The search index with no word of one letter.

    The search box reads `-m` in `python -m treespec check` as "leave out every
    page with the word `m`", and `"n m"` (a jaxtyping shape) puts that word on
    the very pages the query is after. An index without one-letter words
    leaves nothing out for such a flag; the joiner keeps the text as it
    reads.
    """
    index = json.loads(text)
    split = re.compile(f"({index['config']['separator']})")
    for doc in index["docs"]:
        for field in ("title", "text"):
            parts = re.split(r"(<[^>]+>)", doc[field])
            doc[field] = "".join(
                part if part.startswith("<") else _joined(part, split) for part in parts
            )
    return json.dumps(index, ensure_ascii=False, separators=(",", ":"))


def _joined(text: str, split: re.Pattern[str]) -> str:
    words = split.split(text)
    return "".join(
        _JOINER + word
        if index % 2 == 0 and len(word) == 1 and word.isalpha()
        else word or ""
        for index, word in enumerate(words)
    )


#: Rewrites the 404 page's `/...` links to the folder the site is served from.
_FIND_ROOT = """<script>
document.addEventListener("DOMContentLoaded", async () => {
  const parts = location.pathname.split("/").slice(0, -1);
  for (let n = parts.length; n > 0; n--) {
    const root = parts.slice(0, n).join("/") + "/";
    const found = await fetch(root + "search/search_index.json", {method: "HEAD"})
      .then((r) => r.ok, () => false);
    if (!found) continue;
    if (root === "/") return;
    const moved = (value) => root + value.slice(1);
    for (const el of document.querySelectorAll("[href^='/']")) {
      const value = el.getAttribute("href");
      if (!value.startsWith("//")) el.setAttribute("href", moved(value));
    }
    for (const el of document.querySelectorAll("img[src^='/']")) {
      el.setAttribute("src", moved(el.getAttribute("src")));
    }
    // The theme's script failed from the root: run it again from the site's.
    const config = document.getElementById("__config");
    if (config) {
      const settings = JSON.parse(config.textContent);
      settings.base = root;
      if (settings.search) settings.search = moved(settings.search);
      config.textContent = JSON.stringify(settings);
    }
    for (const old of document.querySelectorAll("script[src^='/']")) {
      const script = document.createElement("script");
      script.src = moved(old.getAttribute("src"));
      old.replaceWith(script);
    }
    return;
  }
});
</script>"""


def _rooted(html: str) -> str:
    """The 404 page with links from the site's root and the script above.

    MkDocs writes its links relative to the site's root folder (`./x`,
    `assets/...`); from the root they become `/x`, `/assets/...`.
    """
    html = re.sub(
        r'(href|src)="(?!#|[a-z]+:|/)(?:\./)?([^"]*)"',
        lambda m: f'{m.group(1)}="/{m.group(2)}"',
        html,
    )
    return html.replace("</head>", _FIND_ROOT + "\n</head>", 1)
