"""A Sphinx extension for the book's two editions (English at the site's root, Chinese in zh_CN/).

- At the top of each page, a link to the same page in the other edition, where that page exists
  (the English side links only to the chapters and pages that have a Chinese edition).
- In the Chinese edition, a link to an English document that has no translation yet is written
  `../../notebooks/05_convolutions.ipynb` (it works on GitHub and in JupyterLab); MyST would make it
  a download of the file, so it becomes a link to that English page on the site instead.

Settings (in _config.yml under sphinx.config): bilingual_other = {"root": the other edition's
URL from this site's root, "source": its source folder from this book's folder, "label": the link
text, "lang": its language tag}.

- The Chinese edition's search index: Sphinx 7's Chinese indexer kept the Latin words it had seen
  in a list and scanned it for every word of every page (half of the Chinese build's time); here
  it is a set. Chinese words are cut with jieba, taught the glossary's terms
  (translations/zh_CN/glossary.tsv), so that a search for 自动求导 or 混合精度 finds the pages.
"""

from __future__ import annotations

import html
import posixpath
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.search.zh import SearchChinese

try:
    import jieba  # cuts Chinese text into words for the search index
except ImportError:  # the index then holds the Latin words only
    jieba = None

SUFFIXES = (".ipynb", ".md")


def _other(app) -> dict:
    return app.config.bilingual_other or {}


def other_edition_has(app, docname: str) -> bool:
    source = Path(app.srcdir) / _other(app).get("source", "")
    return any((source / f"{docname}{suffix}").is_file() for suffix in SUFFIXES)


def relink_outside_documents(app, doctree) -> None:
    """A download link to a .ipynb or .md outside this book's folder -> a link to its page."""
    srcdir = Path(app.srcdir).resolve()
    docdir = posixpath.dirname(app.env.docname)
    for node in list(doctree.findall(addnodes.pending_xref)):
        target = node.get("reftarget", "")
        if node.get("refdomain") == "doc" and target.startswith("../"):  # a document outside
            fragment = node.get("reftargetid")
            uri = (
                posixpath.relpath(target, docdir or ".")
                + ".html"
                + (f"#{fragment}" if fragment else "")
            )
            link = nodes.reference("", "", refuri=uri, classes=["bilingual-english"])
            link += node.children
            node.replace_self(link)
    for node in list(doctree.findall(addnodes.download_reference)):
        target = node.get("reftarget", "")
        stem, suffix = posixpath.splitext(target)
        resolved = (srcdir / docdir / target).resolve()
        if suffix in SUFFIXES and srcdir not in resolved.parents and resolved.is_file():
            link = nodes.reference("", "", refuri=stem + ".html", classes=["bilingual-english"])
            link += node.children
            node.replace_self(link)


def add_switch(app, pagename, templatename, context, doctree) -> None:
    other = _other(app)
    if (
        doctree is None
        or "body" not in context
        or not other
        or not other_edition_has(app, pagename)
    ):
        return
    depth = pagename.count("/")
    url = "../" * depth + other["root"] + pagename + ".html"
    lang = html.escape(other.get("lang", ""))
    switch = (
        f'<p class="bilingual-switch"><a href="{html.escape(url)}" hreflang="{lang}" lang="{lang}">'
        f"{html.escape(other['label'])}</a></p>\n"
    )
    context["body"] = switch + context["body"]


class ChineseIndex(SearchChinese):
    """Sphinx's Chinese search language with its Latin words in a set (a list made the build quadratic)."""

    def init(self, options: dict[str, str]) -> None:
        super().init(options)
        self.latin_terms = set()  # the parent's class attribute is a list shared by every instance

    def split(self, input: str) -> list[str]:
        latin = [term.strip() for term in self.latin1_letters.findall(input)]
        self.latin_terms.update(latin)
        chinese = list(jieba.cut_for_search(input)) if jieba else []
        return chinese + latin


def glossary_dictionary(app, config) -> None:
    """For a Chinese build: hand jieba the glossary's Chinese terms as a user dictionary."""
    if not (config.language or "").startswith("zh") or jieba is None:
        return
    glossary = Path(app.srcdir).parent / "translations" / "zh_CN" / "glossary.tsv"
    terms = sorted(
        {
            line.split("\t")[1].strip()
            for line in glossary.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")
        }
    )
    dictionary = Path(app.doctreedir) / "jieba_glossary.txt"
    dictionary.parent.mkdir(parents=True, exist_ok=True)
    dictionary.write_text("".join(f"{term} 100000\n" for term in terms), encoding="utf-8")
    config.html_search_options = {**(config.html_search_options or {}), "dict": str(dictionary)}


def setup(app):
    app.add_config_value("bilingual_other", {}, "html")
    app.add_search_language(ChineseIndex)
    app.connect("config-inited", glossary_dictionary)
    app.connect("doctree-read", relink_outside_documents, priority=100)  # before the collectors
    app.connect("html-page-context", add_switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
