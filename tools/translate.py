"""The Chinese edition (简体中文): PO catalogues kept in step with the English notebooks and pages.

    python -m tools.translate update   # English -> catalogues: new units, stale ones marked fuzzy
    python -m tools.translate build    # catalogues -> zh_CN/ (notebooks, pages, site config, toc)
    python -m tools.translate check    # exit 1 listing each missing or stale unit, document by document

The English notebooks and pages are the source. Each translated document has one catalogue,
translations/zh_CN/<document>.po (for example translations/zh_CN/notebooks/02_nn_module.po or
translations/zh_CN/book/setup.po); the set of catalogues is the list of translated documents, so
the edition grows a catalogue at a time (`update --add notebooks/03_datasets_and_dataloaders`).

A unit is one markdown cell of a notebook (msgctxt: the cell id, so an edited cell is found again)
or one block of a Markdown page (a paragraph, a heading, a list item, a table, a quote; msgctxt:
the section's slug and the block's place in it). Code blocks of a page, and the code cells, their
outputs, ids, tags and metadata of a notebook, are not units: `build` copies them unchanged.
translations/zh_CN/_site.po holds the site's title and the toc's part captions (a part's
caption can be translated before its first document: `update` keeps it).

Translators keep the English link targets: `build` points each relative link of a Chinese
document at the Chinese copy where one exists (with the anchor of the translated heading), and
at the English file otherwise, and `check` reports any Chinese document that differs from what
`build` writes now.
"""

from __future__ import annotations

import argparse
import copy
import os
import posixpath
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import polib
import yaml

from tools import REPO_ROOT

LANGUAGE = "zh_CN"
SITE_CATALOGUE = "_site"  # translations/zh_CN/_site.po: the site's title and the toc's captions
SOURCE_SUFFIXES = (".ipynb", ".md")
# The theme strings that Sphinx's language setting leaves in English: MyST-NB's fold toggles.
PROMPTS = {
    "nb_code_prompt_show": "Show code cell {type}",
    "nb_code_prompt_hide": "Hide code cell {type}",
}
GENERATED_NOTE = (
    "written by `python -m tools.translate build` from the English one and translations/zh_CN/"
    "_site.po; edit those, not this file"
)


class TranslateError(Exception):
    """A problem in the catalogues or the sources, worded for the maintainer who must fix it."""


@dataclass(frozen=True)
class Unit:
    context: str  # msgctxt: the cell id, or "<section slug>/<n>" for a page's block
    text: str  # msgid: the English markdown


@dataclass
class Edition:
    """Where the sources, the catalogues and the generated edition live (tests use a tmp_path)."""

    root: Path = REPO_ROOT
    language: str = LANGUAGE

    @property
    def catalogue_dir(self) -> Path:
        return self.root / "translations" / self.language

    @property
    def output_dir(self) -> Path:
        return self.root / self.language

    def documents(self) -> list[str]:
        """The translated documents ("notebooks/01_x", "book/setup"): one per catalogue."""
        if not self.catalogue_dir.is_dir():
            return []
        docs = []
        for po in sorted(self.catalogue_dir.rglob("*.po")):
            doc = po.relative_to(self.catalogue_dir).with_suffix("").as_posix()
            if doc != SITE_CATALOGUE:
                docs.append(doc)
        return docs

    def catalogue(self, doc: str) -> Path:
        return self.catalogue_dir / f"{doc}.po"

    def source(self, doc: str) -> Path:
        """The English file of a document; a clear error when there is none."""
        for suffix in SOURCE_SUFFIXES:
            path = self.root / f"{doc}{suffix}"
            if path.is_file():
                return path
        raise TranslateError(
            f"{self.catalogue(doc).relative_to(self.root)}: no English source "
            f"{doc}.ipynb or {doc}.md; restore the document, or delete its catalogue if the "
            "document was removed or renamed (then `update --add` the new name)"
        )

    def target(self, doc: str) -> Path:
        return self.output_dir / self.source(doc).relative_to(self.root)


# --- units: what is translated -------------------------------------------------------------------


def read_notebook(path: Path) -> nbformat.NotebookNode:
    try:
        return nbformat.read(path, as_version=4)
    except Exception as error:  # nbformat raises several kinds for a broken file
        raise TranslateError(f"{path}: not a readable notebook ({error})") from error


def notebook_units(nb: nbformat.NotebookNode, path: Path) -> list[Unit]:
    units = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown" or not cell.source.strip():
            continue
        if not cell.get("id"):
            raise TranslateError(f"{path}: markdown cell {index} has no id (nbformat 4.5 or newer)")
        units.append(Unit(cell.id, cell.source))
    return units


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,}|:{3,})\s*(\S*)")
VERBATIM_DIRECTIVES = ("code", "code-block", "code-cell", "literalinclude", "math", "raw")
LABEL = re.compile(r"^\(\S+\)=\s*$")  # a MyST target, `(name)=`, on its own line
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def split_page(text: str) -> list[tuple[str, bool]]:
    """A Markdown page as chunks (text, is_unit) whose concatenation is the page.

    Units are blocks separated by blank lines, each heading on its own; code fences (and
    directives that hold code) stay verbatim, prose directives (note, admonition ...) are one
    unit each, and so are tables and quotes. Labels like `(name)=` and HTML comments are verbatim."""
    lines = text.splitlines(keepends=True)
    chunks: list[tuple[str, bool]] = []
    block: list[str] = []

    def flush() -> None:
        if not block:
            return
        body = "".join(block)
        stripped = body.rstrip("\n")
        is_unit = bool(re.search(r"[^\W\d_]", stripped)) and not (
            re.fullmatch(r"\(\S+\)=", stripped.strip()) or stripped.lstrip().startswith("<!--")
        )
        chunks.append((stripped, is_unit))
        if len(body) > len(stripped):
            chunks.append((body[len(stripped) :], False))
        block.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence and not block:
            marker, info = fence.group(2), fence.group(3)
            end = i + 1
            while end < len(lines):
                closing = FENCE.match(lines[end])
                if (
                    closing
                    and closing.group(2)[0] == marker[0]
                    and len(closing.group(2)) >= len(marker)
                    and not closing.group(3)
                ):
                    break
                end += 1
            body = "".join(lines[i : end + 1])
            name = info.strip("{}") if info.startswith("{") else None
            prose = name is not None and name not in VERBATIM_DIRECTIVES
            stripped = body.rstrip("\n")
            chunks.append((stripped, prose))
            if len(body) > len(stripped):
                chunks.append((body[len(stripped) :], False))
            i = end + 1
            continue
        if not line.strip() or LABEL.match(line):
            flush()
            chunks.append((line, False))
        elif HEADING.match(line) and not FENCE.match(line):
            flush()
            block.append(line)
            flush()
        else:
            block.append(line)
        i += 1
    flush()
    merged: list[tuple[str, bool]] = []  # join neighbouring verbatim chunks
    for chunk, is_unit in chunks:
        if merged and not is_unit and not merged[-1][1]:
            merged[-1] = (merged[-1][0] + chunk, False)
        else:
            merged.append((chunk, is_unit))
    assert "".join(chunk for chunk, _ in merged) == text
    return merged


def strip_inline(markdown: str) -> str:
    """A heading's text as rendered: no code marks, emphasis or link targets."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return re.sub(r"`|\*+", "", text).strip()


def slugify(title: str) -> str:
    """MyST's heading slug (myst_parser's default_slugify, GitHub's rule)."""
    return re.sub(r"[^\w\u4e00-\u9fff\- ]", "", strip_inline(title).lower().replace(" ", "-"))


def headings(markdown: str) -> list[str]:
    """The heading titles of a markdown text, outside code fences."""
    found, fenced = [], None
    for line in markdown.splitlines():
        fence = FENCE.match(line)
        if fence:
            if fenced is None:
                fenced = fence.group(2)[0]
            elif fence.group(2)[0] == fenced:
                fenced = None
            continue
        match = HEADING.match(line)
        if match and fenced is None:
            found.append(match.group(2))
    return found


def page_units(text: str) -> list[Unit]:
    units, section, counts = [], "top", {}
    seen: dict[str, int] = {}
    for chunk, is_unit in split_page(text):
        if not is_unit:
            continue
        match = HEADING.match(chunk)
        if match and "\n" not in chunk:
            slug = slugify(match.group(2)) or "section"
            seen[slug] = seen.get(slug, -1) + 1
            section = slug if not seen[slug] else f"{slug}-{seen[slug]}"
        counts[section] = counts.get(section, -1) + 1
        units.append(Unit(f"{section}/{counts[section]}", chunk))
    return units


def source_units(edition: Edition, doc: str) -> list[Unit]:
    path = edition.source(doc)
    if path.suffix == ".ipynb":
        return notebook_units(read_notebook(path), path)
    return page_units(path.read_text(encoding="utf-8"))


def site_units(edition: Edition) -> list[Unit]:
    config = yaml.safe_load((edition.root / "_config.yml").read_text(encoding="utf-8"))
    units = [Unit("title", config["title"]), Unit("search", "Search this book...")]
    units += [Unit(key, text) for key, text in PROMPTS.items()]
    for part in english_toc(edition).get("parts", []):
        if any(doc in edition.documents() for doc in toc_part_files(part)):
            units.append(Unit("caption", part["caption"]))
    return units


def english_toc(edition: Edition) -> dict:
    return yaml.safe_load((edition.root / "_toc.yml").read_text(encoding="utf-8"))


def toc_part_files(entry: dict) -> list[str]:
    files = [entry["file"]] if "file" in entry else []
    for key in ("chapters", "sections"):
        for child in entry.get(key, []):
            files += toc_part_files(child)
    return files


# --- catalogues ----------------------------------------------------------------------------------


def new_catalogue(edition: Edition) -> polib.POFile:
    po = polib.POFile(wrapwidth=0)
    po.metadata = {
        "Project-Id-Version": "pytorch-book",
        "Language": edition.language,
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
    }
    return po


def load_catalogue(path: Path) -> polib.POFile:
    try:
        po = polib.pofile(str(path), wrapwidth=0)
    except (OSError, ValueError) as error:
        raise TranslateError(f"{path}: not a readable PO catalogue ({error})") from error
    return po


def save_catalogue(po: polib.POFile, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    po.wrapwidth = 0
    text = po.__unicode__()
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")


def merge(po: polib.POFile, units: list[Unit], edition: Edition) -> tuple[polib.POFile, dict]:
    """The catalogue for `units`: translations kept, changed English fuzzy, vanished units dropped."""
    old = [entry for entry in po if not entry.obsolete]
    by_key = {(e.msgctxt, e.msgid): e for e in old}
    by_context = {e.msgctxt: e for e in old}
    by_text: dict[str, polib.POEntry] = {}
    for entry in old:
        if entry.msgstr and "fuzzy" not in entry.flags:
            by_text.setdefault(entry.msgid, entry)
    merged, stats = new_catalogue(edition), {"new": 0, "fuzzy": 0, "dropped": 0}
    used = set()
    for unit in units:
        entry = polib.POEntry(msgctxt=unit.context, msgid=unit.text, msgstr="")
        exact = by_key.get((unit.context, unit.text))
        # every toc caption has the context "caption": another caption's text is no translation
        renamed = by_context.get(unit.context) if unit.context != "caption" else None
        moved = by_text.get(unit.text)
        if exact is not None:
            entry.msgstr, entry.flags = exact.msgstr, list(exact.flags)
            entry.previous_msgid = exact.previous_msgid
            used.add(id(exact))
        elif moved is not None:  # the same English under another id or place: still right
            entry.msgstr = moved.msgstr
            used.add(id(moved))
        elif renamed is not None:  # the English of this cell changed: the translation is stale
            entry.msgstr = renamed.msgstr
            if renamed.msgstr:
                entry.flags = ["fuzzy"]
                entry.previous_msgid = renamed.previous_msgid or renamed.msgid
                stats["fuzzy"] += 1
            used.add(id(renamed))
        else:
            stats["new"] += 1
        merged.append(entry)
    stats["dropped"] = sum(1 for e in old if id(e) not in used)
    return merged, stats


def update(edition: Edition, add: list[str] = ()) -> list[str]:
    """Bring every catalogue (and new ones for `add`) up to date with the English; a report."""
    report = []
    for doc in add:
        doc = doc.removesuffix(".ipynb").removesuffix(".md").removesuffix(".po")
        edition.source(doc)  # a clear error for a document that does not exist
        if not edition.catalogue(doc).exists():
            save_catalogue(new_catalogue(edition), edition.catalogue(doc))
    for doc in edition.documents():
        path = edition.catalogue(doc)
        po, stats = merge(load_catalogue(path), source_units(edition, doc), edition)
        save_catalogue(po, path)
        report.append(
            f"{doc}: {len(po)} units, {stats['new']} new, {stats['fuzzy']} now fuzzy, "
            f"{stats['dropped']} obsolete dropped"
        )
    if edition.documents():
        path = edition.catalogue_dir / f"{SITE_CATALOGUE}.po"
        old = load_catalogue(path) if path.exists() else new_catalogue(edition)
        po, stats = merge(old, site_units(edition), edition)
        # A translated caption of an English part with no translated document yet is kept, so a
        # part's caption can be translated before (or while) its first document is.
        captions = {part["caption"] for part in english_toc(edition).get("parts", [])}
        kept = {(e.msgctxt, e.msgid) for e in po}
        for entry in old:
            if (
                entry.msgctxt == "caption"
                and entry.msgid in captions
                and entry.msgstr
                and "fuzzy" not in entry.flags
                and not entry.obsolete
                and (entry.msgctxt, entry.msgid) not in kept
            ):
                po.append(polib.POEntry(msgctxt="caption", msgid=entry.msgid, msgstr=entry.msgstr))
        save_catalogue(po, path)
    return report


# --- check ---------------------------------------------------------------------------------------


def problems(edition: Edition, units: list[Unit], path: Path) -> list[str]:
    """Each unit with no current translation: missing, or stale (English changed, or fuzzy)."""
    if not path.exists():
        return [f"catalogue {path.name} is missing"]
    entries = {(e.msgctxt, e.msgid): e for e in load_catalogue(path) if not e.obsolete}
    contexts = {ctxt for ctxt, _ in entries}
    found = []
    for unit in units:
        entry = entries.get((unit.context, unit.text))
        label = f"cell {unit.context}" if "/" not in unit.context else f"block {unit.context}"
        if unit.context in ("title", "caption", "search", *PROMPTS):
            label = f"{unit.context} {unit.text!r}"
        if entry is None:
            why = "stale: its English changed" if unit.context in contexts else "missing"
            found.append(f"{label} ({why})")
        elif not entry.msgstr.strip():
            found.append(f"{label} (missing)")
        elif "fuzzy" in entry.flags:
            found.append(f"{label} (stale: fuzzy, its English changed)")
    return found


def check(edition: Edition) -> dict[str, list[str]]:
    """{document: [problems]} for every catalogue; empty when all is translated and built."""
    report: dict[str, list[str]] = {}
    for doc in edition.documents():
        found = problems(edition, source_units(edition, doc), edition.catalogue(doc))
        if not found:
            target = edition.target(doc)
            if not target.is_file() or target.read_text(encoding="utf-8") != render(edition, doc):
                found.append(f"{target.relative_to(edition.root)} differs from what `build` writes")
        if found:
            report[doc] = found
    if edition.documents():
        site = problems(
            edition, site_units(edition), edition.catalogue_dir / f"{SITE_CATALOGUE}.po"
        )
        if site:
            report[SITE_CATALOGUE] = site
    return report


# --- build ---------------------------------------------------------------------------------------


def translations(edition: Edition, doc: str) -> dict[tuple[str, str], str]:
    """(msgctxt, msgid) -> Chinese, for every translated entry (a fuzzy one included: stale text
    beats English in a draft build; `check` and the tests refuse it)."""
    path = edition.catalogue(doc)
    return {
        (e.msgctxt, e.msgid): e.msgstr for e in load_catalogue(path) if e.msgstr and not e.obsolete
    }


def anchor_map(edition: Edition, doc: str) -> dict[str, str]:
    """English heading slug -> the slug of its translated heading, for one translated document."""
    mapping: dict[str, str] = {}
    found = translations(edition, doc)
    for unit in source_units(edition, doc):
        english, chinese = headings(unit.text), headings(found.get((unit.context, unit.text), ""))
        if len(english) == len(chinese):
            for en, zh in zip(english, chinese, strict=True):
                mapping.setdefault(slugify(en), slugify(zh))
    return mapping


LINK = re.compile(r"(!?\[(?:[^\[\]]|\[[^\]]*\])*\]\()([^)\s]+)((?:\s+\"[^\"]*\")?\))")
HTML_LINK = re.compile(r"((?:href|src)=\")([^\"]+)(\")")


def relink(edition: Edition, doc: str, markdown: str, anchors: dict) -> str:
    """Point the relative links of a translated text, written against the English file, at the
    Chinese copy of a translated document (heading anchors translated) or else the English file."""
    source_dir = posixpath.dirname(edition.source(doc).relative_to(edition.root).as_posix())
    target_dir = posixpath.join(edition.language, source_dir)
    translated = set(edition.documents())

    def fix(target: str) -> str:
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("/"):
            return target
        path, _, fragment = target.partition("#")
        if not path:  # an anchor in the same document
            return "#" + anchors.get(doc, {}).get(fragment, fragment) if fragment else target
        resolved = posixpath.normpath(posixpath.join(source_dir, path))
        stem, suffix = posixpath.splitext(resolved)
        if suffix in SOURCE_SUFFIXES and stem in translated:
            new = posixpath.relpath(posixpath.join(edition.language, resolved), target_dir)
            if fragment:
                fragment = anchors.get(stem, {}).get(fragment, fragment)
        else:
            new = posixpath.relpath(resolved, target_dir)
        return new + ("#" + fragment if fragment else "")

    markdown = LINK.sub(lambda m: m.group(1) + fix(m.group(2)) + m.group(3), markdown)
    return HTML_LINK.sub(lambda m: m.group(1) + fix(m.group(2)) + m.group(3), markdown)


def all_anchor_maps(edition: Edition) -> dict[str, dict[str, str]]:
    return {doc: anchor_map(edition, doc) for doc in edition.documents()}


def render(edition: Edition, doc: str, anchors: dict | None = None) -> str:
    """The text of the Chinese document: translated markdown, everything else from the English."""
    anchors = all_anchor_maps(edition) if anchors is None else anchors
    found = translations(edition, doc)
    path = edition.source(doc)

    def translate(unit: Unit) -> str:
        return relink(edition, doc, found.get((unit.context, unit.text), unit.text), anchors)

    if path.suffix == ".ipynb":
        nb = read_notebook(path)
        chinese = copy.deepcopy(nb)
        units = {u.context: u for u in notebook_units(nb, path)}
        for cell in chinese.cells:
            if cell.cell_type == "markdown" and cell.get("id") in units:
                cell.source = translate(units[cell.id])
        return nbformat.writes(chinese) + "\n"
    text = path.read_text(encoding="utf-8")
    units = iter(page_units(text))
    out = []
    for chunk, is_unit in split_page(text):
        out.append(translate(next(units)) if is_unit else chunk)
    return "".join(out)


def site_text(edition: Edition, english: str) -> str:
    path = edition.catalogue_dir / f"{SITE_CATALOGUE}.po"
    if not path.exists():
        return english
    for entry in load_catalogue(path):
        if entry.msgid == english and entry.msgstr:
            return entry.msgstr
    return english


def site_files(edition: Edition) -> dict[Path, str]:
    """zh_CN/_config.yml and zh_CN/_toc.yml, derived from the English ones."""
    translated = set(edition.documents())
    toc = yaml.safe_load((edition.root / "_toc.yml").read_text(encoding="utf-8"))
    if toc["root"] not in translated:
        raise TranslateError(
            f"the site's root page {toc['root']} has no catalogue: the Chinese site needs it "
            f"(`python -m tools.translate update --add {toc['root']}`)"
        )

    def keep(entries: list[dict]) -> list[dict]:
        kept = []
        for entry in entries:
            children = {k: keep(entry[k]) for k in ("chapters", "sections") if k in entry}
            if entry.get("file") in translated or any(children.values()):
                new = {k: v for k, v in entry.items() if k not in children}
                if "caption" in new:
                    new["caption"] = site_text(edition, new["caption"])
                new.update({k: v for k, v in children.items() if v})
                kept.append(new)
        return kept

    chinese_toc = {k: v for k, v in toc.items() if k != "parts"}
    chinese_toc["parts"] = keep(toc.get("parts", []))
    config = yaml.safe_load((edition.root / "_config.yml").read_text(encoding="utf-8"))
    config["title"] = site_text(edition, config["title"])
    config.setdefault("repository", {})["path_to_book"] = edition.language
    sphinx = config.setdefault("sphinx", {})
    sphinx.setdefault("config", {})["language"] = edition.language
    sphinx["config"].setdefault("html_theme_options", {})["search_bar_text"] = site_text(
        edition, "Search this book..."
    )
    if (edition.root / "_static").is_dir():  # the English book's CSS, shared
        sphinx["config"]["html_static_path"] = [posixpath.relpath("_static", edition.language)]
        sphinx["config"]["html_css_files"] = sorted(
            p.name for p in (edition.root / "_static").glob("*.css")
        )
    for key, english in PROMPTS.items():
        sphinx["config"][key] = site_text(edition, english)
    sphinx["config"]["bilingual_other"] = {
        "root": "../",
        "source": "..",
        "label": "English",
        "lang": "en",
    }
    local = sphinx.get("local_extensions") or {}
    sphinx["local_extensions"] = {
        name: posixpath.relpath(posixpath.normpath(where), edition.language)
        for name, where in local.items()
    }
    config["exclude_patterns"] = ["_build/*", "**/.ipynb_checkpoints/*"]
    header = f"# The Chinese site's {{}}: {GENERATED_NOTE}.\n"
    dump = {"allow_unicode": True, "sort_keys": False, "width": 100}
    return {
        edition.output_dir / "_config.yml": header.format("configuration")
        + yaml.safe_dump(config, **dump),
        edition.output_dir / "_toc.yml": header.format("table of contents")
        + yaml.safe_dump(chinese_toc, **dump),
    }


def expected_files(edition: Edition) -> dict[Path, str]:
    """Every file `build` writes, with its text."""
    anchors = all_anchor_maps(edition)
    files = {edition.target(doc): render(edition, doc, anchors) for doc in edition.documents()}
    if files:
        files.update(site_files(edition))
    return files


def build(edition: Edition) -> list[str]:
    """Write the Chinese edition; remove generated documents whose catalogue is gone."""
    files = expected_files(edition)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    removed = []
    if edition.output_dir.is_dir():
        for path in sorted(edition.output_dir.rglob("*")):
            if path.suffix in SOURCE_SUFFIXES and path not in files and "_build" not in path.parts:
                path.unlink()
                removed.append(str(path.relative_to(edition.root)))
    drafts = {doc: found for doc, found in check(edition).items() if found}
    notes = [
        f"{doc}: built with English or stale text for {len(found)} units"
        for doc, found in drafts.items()
    ]
    return (
        [f"wrote {len(files)} files under {edition.output_dir.relative_to(edition.root)}/"]
        + [f"removed {path} (no catalogue)" for path in removed]
        + notes
    )


def format_check(report: dict[str, list[str]]) -> str:
    lines = []
    for doc, found in report.items():
        lines.append(f"{doc}: {len(found)} to fix")
        lines += [f"  {item}" for item in found]
    lines.append(
        "Run `python -m tools.translate update`, translate the missing and fuzzy entries in "
        "translations/zh_CN/*.po, then `python -m tools.translate build` and commit both."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.translate", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("update", help="refresh the catalogues from the English sources")
    up.add_argument("--add", nargs="*", default=[], metavar="DOC", help="start a catalogue for DOC")
    sub.add_parser("build", help="write the Chinese notebooks, pages and site config")
    sub.add_parser("check", help="list missing or stale translations; exit 1 if any")
    args = parser.parse_args(argv)
    edition = Edition()
    try:
        if args.command == "update":
            print("\n".join(update(edition, args.add)))
        elif args.command == "build":
            print("\n".join(build(edition)))
        else:
            report = check(edition)
            if report:
                print(format_check(report), file=sys.stderr)
                return 1
            print(f"{len(edition.documents())} documents translated, nothing missing or stale")
    except TranslateError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    os.chdir(REPO_ROOT)
    sys.exit(main())
