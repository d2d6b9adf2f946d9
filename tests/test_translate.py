"""The Chinese edition stays in step with the English one (tools/translate.py).

On the real book: every catalogue is complete (no missing or stale unit), every committed Chinese
notebook and page is exactly what `python -m tools.translate build` writes now, every Chinese
notebook's code, outputs, ids and tags are the English ones (so the strict nbval run of the English
notebooks proves both editions), and the translations use the glossary's terms. Then the tool
itself, on small fake books in tmp_path.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import polib
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tests.helpers import REPO_ROOT
from tools import translate
from tools.translate import Edition, TranslateError

EDITION = Edition()
GLOSSARY = EDITION.catalogue_dir / "glossary.tsv"
FIX = (
    "run `python -m tools.translate update`, translate the entries it lists (empty or marked "
    "fuzzy) in translations/zh_CN/, then `python -m tools.translate build`, and commit both"
)


# --- the real book -------------------------------------------------------------------------------


def test_the_edition_has_documents() -> None:
    docs = EDITION.documents()
    assert "book/intro" in docs, "the Chinese site's root page (book/intro) has no catalogue"
    assert len(docs) >= 2


def test_no_missing_or_stale_translation() -> None:
    found = {}
    for doc in EDITION.documents():
        units = translate.source_units(EDITION, doc)
        if problems := translate.problems(EDITION, units, EDITION.catalogue(doc)):
            found[doc] = problems
    site = translate.site_units(EDITION)
    if problems := translate.problems(EDITION, site, EDITION.catalogue_dir / "_site.po"):
        found["_site (title, search text, toc captions)"] = problems
    listing = "\n".join(f"{doc}:\n  " + "\n  ".join(items) for doc, items in found.items())
    assert not found, f"untranslated or stale units:\n{listing}\nTo fix: {FIX}."


def test_committed_edition_is_what_build_writes() -> None:
    expected = translate.expected_files(EDITION)
    differs = [
        str(path.relative_to(REPO_ROOT))
        for path, text in expected.items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    generated = {p for p in EDITION.output_dir.rglob("*") if p.suffix in (".ipynb", ".md", ".yml")}
    extra = sorted(
        str(p.relative_to(REPO_ROOT)) for p in generated - set(expected) if "_build" not in p.parts
    )
    assert not differs and not extra, (
        f"Chinese files that differ from what the catalogues give: {differs}; Chinese files with "
        f"no catalogue: {extra}. Never edit zh_CN/ by hand: {FIX}."
    )


def chinese_notebooks() -> list[tuple[Path, Path]]:
    pairs = []
    for doc in EDITION.documents():
        english = EDITION.source(doc)
        if english.suffix == ".ipynb":
            pairs.append((english, EDITION.target(doc)))
    return pairs


@pytest.mark.parametrize(
    "english, chinese", chinese_notebooks(), ids=lambda p: p.stem if isinstance(p, Path) else p
)
def test_chinese_notebook_runs_the_english_code(english: Path, chinese: Path) -> None:
    """Code cells, their outputs, every cell's id, type and metadata (tags), and the notebook's
    metadata are the English ones: only markdown sources differ."""
    en = json.loads(english.read_text(encoding="utf-8"))
    zh = json.loads(chinese.read_text(encoding="utf-8"))
    assert zh["metadata"] == en["metadata"]
    assert [(c["id"], c["cell_type"]) for c in zh["cells"]] == [
        (c["id"], c["cell_type"]) for c in en["cells"]
    ]
    for en_cell, zh_cell in zip(en["cells"], zh["cells"], strict=True):
        if en_cell["cell_type"] == "markdown":
            assert zh_cell["metadata"] == en_cell["metadata"], en_cell["id"]
        else:
            assert zh_cell == en_cell, f"code cell {en_cell['id']} differs from the English one"


def read_glossary(path: Path = GLOSSARY) -> dict[str, str]:
    terms = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            english, chinese = line.split("\t")
            terms[english.strip()] = chinese.strip()
    return terms


def prose(markdown: str) -> str:
    """The words of a markdown text: no code blocks, inline code, link targets or HTML."""
    text = re.sub(r"^(`{3,}|~{3,}).*?^\1\s*$", " ", markdown, flags=re.M | re.S)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"<[^>]+>", " ", text)


def glossary_misses(entries, terms: dict[str, str]) -> list[str]:
    misses = []
    for entry in entries:
        if not entry.msgstr or "fuzzy" in entry.flags:
            continue
        english = prose(entry.msgid).lower()
        for term, chinese in terms.items():
            if (
                re.search(rf"(?<![\w-]){re.escape(term)}(?:s|es)?(?![\w-])", english)
                and chinese not in entry.msgstr
            ):
                misses.append(f"{entry.msgctxt}: {term!r} -> {chinese!r}")
    return misses


def test_glossary_is_well_formed() -> None:
    terms = read_glossary()
    assert len(terms) >= 20 and all(terms.values())
    assert terms["tensor"] == "张量" and terms["autograd"] == "自动求导"


def test_translations_use_the_glossary_terms() -> None:
    terms, found = read_glossary(), {}
    for doc in EDITION.documents():
        if misses := glossary_misses(polib.pofile(str(EDITION.catalogue(doc))), terms):
            found[doc] = misses
    listing = "\n".join(f"{doc}:\n  " + "\n  ".join(items) for doc, items in found.items())
    assert not found, (
        "translations that leave out the glossary's term for an English term their unit uses "
        f"(translations/zh_CN/glossary.tsv):\n{listing}"
    )


def test_glossary_check_catches_a_missing_term() -> None:
    entry = polib.POEntry(msgctxt="c1", msgid="Each `tensor` has a gradient.", msgstr="每个都有。")
    assert glossary_misses([entry], {"gradient": "梯度", "tensor": "张量"}) == [
        "c1: 'gradient' -> '梯度'"
    ]


# --- the tool, on a small fake book --------------------------------------------------------------


def fake_book(root: Path) -> Edition:
    (root / "notebooks").mkdir(parents=True)
    (root / "book").mkdir()
    (root / "_config.yml").write_text('title: "A book"\nsphinx:\n  config: {}\n', encoding="utf-8")
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n"
        '  - caption: "Part I"\n    chapters:\n      - file: notebooks/01_a\n'
        '  - caption: "Part II"\n    chapters:\n      - file: notebooks/02_b\n',
        encoding="utf-8",
    )
    nb = new_notebook(
        cells=[
            new_markdown_cell("# 01 · Tensors\n\nSee [chapter 02](02_b.ipynb#the-end).", id="m1"),
            new_code_cell("x = 1  # a comment\nprint(x)", id="c1", execution_count=1),
            new_markdown_cell("## A heading\n\nMore [setup](../book/intro.md#start).", id="m2"),
        ]
    )
    nb.cells[1].outputs = [new_output("stream", name="stdout", text="1\n")]
    nb.cells[1].metadata["tags"] = ["nbval-ignore-output"]
    nbformat.write(nb, root / "notebooks" / "01_a.ipynb")
    nbformat.write(
        new_notebook(cells=[new_markdown_cell("# 02", id="z")]), root / "notebooks/02_b.ipynb"
    )
    (root / "book" / "intro.md").write_text(
        "# Intro\n\nA paragraph\non two lines.\n\n## Start\n\n```bash\nmake lab\n\n# a comment\n```\n\n"
        "(a-label)=\n- a list\n- of two\n",
        encoding="utf-8",
    )
    return Edition(root=root)


def translate_all(edition: Edition, doc: str, prefix: str = "译：") -> None:
    path = edition.catalogue(doc)
    po = polib.pofile(str(path))
    for entry in po:
        entry.msgstr = prefix + entry.msgid
        if entry.msgid.startswith("## A heading"):
            entry.msgstr = entry.msgid.replace("A heading", "一个标题")
        if entry.msgid == "## Start":
            entry.msgstr = "## 开始"
        entry.flags = []
    po.save(str(path))


@pytest.fixture
def book(tmp_path: Path) -> Edition:
    edition = fake_book(tmp_path)
    translate.update(edition, add=["notebooks/01_a", "book/intro"])
    translate_all(edition, "notebooks/01_a")
    translate_all(edition, "book/intro")
    site = polib.pofile(str(edition.catalogue_dir / "_site.po"))
    for entry in site:
        entry.msgstr = "中文 " + entry.msgid
    site.save(str(edition.catalogue_dir / "_site.po"))
    translate.build(edition)
    return edition


def entries(edition: Edition, doc: str) -> dict[str, polib.POEntry]:
    return {e.msgctxt: e for e in polib.pofile(str(edition.catalogue(doc)))}


def test_units_are_markdown_cells_and_page_blocks(book: Edition) -> None:
    assert list(entries(book, "notebooks/01_a")) == ["m1", "m2"]
    page = entries(book, "book/intro")
    assert list(page) == ["intro/0", "intro/1", "start/0", "start/1"]
    assert page["intro/1"].msgid == "A paragraph\non two lines."
    assert all("make lab" not in e.msgid for e in page.values()), "a code block became a unit"
    assert translate.check(book) == {}


def test_an_edited_english_cell_becomes_fuzzy_and_check_names_it(book: Edition) -> None:
    path = book.root / "notebooks" / "01_a.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].source = "## A heading\n\nChanged text."
    nbformat.write(nb, path)
    assert translate.check(book) == {"notebooks/01_a": ["cell m2 (stale: its English changed)"]}
    translate.update(book)
    entry = entries(book, "notebooks/01_a")["m2"]
    assert "fuzzy" in entry.flags and entry.msgid == "## A heading\n\nChanged text."
    assert entry.previous_msgid.startswith("## A heading\n\nMore") and entry.msgstr
    assert translate.check(book) == {
        "notebooks/01_a": ["cell m2 (stale: fuzzy, its English changed)"]
    }
    assert translate.main is not None and "fuzzy" in book.catalogue("notebooks/01_a").read_text()


def test_a_new_cell_is_missing_and_a_deleted_one_is_dropped(book: Edition) -> None:
    path = book.root / "notebooks" / "01_a.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(1, new_markdown_cell("A new cell.", id="m9"))
    del nb.cells[3]  # m2
    nbformat.write(nb, path)
    report = translate.check(book)["notebooks/01_a"]
    assert report[0] == "cell m9 (missing)"
    assert translate.update(book)[1] == (
        "notebooks/01_a: 2 units, 1 new, 0 now fuzzy, 1 obsolete dropped"
    )
    found = entries(book, "notebooks/01_a")
    assert list(found) == ["m1", "m9"] and found["m9"].msgstr == ""
    assert "More [setup]" not in book.catalogue("notebooks/01_a").read_text(), "obsolete kept"


def test_update_keeps_translations_and_is_idempotent(book: Edition) -> None:
    before = book.catalogue("notebooks/01_a").read_text()
    translate.update(book)
    assert book.catalogue("notebooks/01_a").read_text() == before


def test_code_outputs_ids_and_tags_are_copied_exactly(book: Edition) -> None:
    en = json.loads((book.root / "notebooks/01_a.ipynb").read_text())
    zh = json.loads((book.root / "zh_CN/notebooks/01_a.ipynb").read_text())
    assert zh["cells"][1] == en["cells"][1]
    assert zh["metadata"] == en["metadata"]
    assert [c["id"] for c in zh["cells"]] == ["m1", "c1", "m2"]
    assert "".join(zh["cells"][0]["source"]).startswith("译：# 01 · Tensors")
    chinese_page = (book.root / "zh_CN/book/intro.md").read_text()
    assert "```bash\nmake lab\n\n# a comment\n```" in chinese_page
    assert "\n(a-label)=\n译：- a list\n- of two\n" in chinese_page


def test_links_point_at_the_chinese_copy_or_the_english_file(book: Edition) -> None:
    zh = nbformat.read(book.root / "zh_CN/notebooks/01_a.ipynb", as_version=4)
    # 02_b has no catalogue: its English file, one folder further up
    assert "[chapter 02](../../notebooks/02_b.ipynb#the-end)" in zh.cells[0].source
    # intro is translated: its Chinese copy, with the anchor of the translated heading
    assert "[setup](../book/intro.md#开始)" in zh.cells[2].source


def test_site_config_and_toc_list_only_translated_documents(book: Edition) -> None:
    import yaml

    toc = yaml.safe_load((book.root / "zh_CN/_toc.yml").read_text())
    assert toc["root"] == "book/intro"
    assert toc["parts"] == [{"caption": "中文 Part I", "chapters": [{"file": "notebooks/01_a"}]}]
    config = yaml.safe_load((book.root / "zh_CN/_config.yml").read_text())
    assert config["title"] == "中文 A book" and config["sphinx"]["config"]["language"] == "zh_CN"


def test_a_caption_translated_before_its_part_has_a_document_is_kept(book: Edition) -> None:
    import yaml

    site = book.catalogue_dir / "_site.po"
    po = polib.pofile(str(site))
    po.append(polib.POEntry(msgctxt="caption", msgid="Part II", msgstr="第二部分"))
    po.save(str(site))
    translate.update(book)  # Part II has no translated document yet: its caption stays
    captions = {e.msgid: e for e in polib.pofile(str(site)) if e.msgctxt == "caption"}
    assert captions["Part II"].msgstr == "第二部分" and translate.check(book) == {}
    translate.update(book, add=["notebooks/02_b"])
    translate_all(book, "notebooks/02_b")
    translate.build(book)
    captions = {e.msgid: e for e in polib.pofile(str(site)) if e.msgctxt == "caption"}
    assert captions["Part II"].msgstr == "第二部分" and not captions["Part II"].flags
    toc = yaml.safe_load((book.root / "zh_CN/_toc.yml").read_text())
    assert [part["caption"] for part in toc["parts"]] == ["中文 Part I", "第二部分"]


def test_a_new_caption_does_not_take_another_captions_translation(book: Edition) -> None:
    translate.update(book, add=["notebooks/02_b"])
    captions = {
        e.msgid: e
        for e in polib.pofile(str(book.catalogue_dir / "_site.po"))
        if e.msgctxt == "caption"
    }
    assert captions["Part II"].msgstr == "" and not captions["Part II"].flags
    assert translate.check(book)["_site"] == ["caption 'Part II' (missing)"]


def test_check_reports_a_hand_edit_of_a_chinese_file(book: Edition) -> None:
    target = book.root / "zh_CN/book/intro.md"
    target.write_text(target.read_text() + "hand edit\n")
    assert translate.check(book) == {
        "book/intro": ["zh_CN/book/intro.md differs from what `build` writes"]
    }


def test_a_catalogue_for_a_missing_document_is_a_clear_error(book: Edition) -> None:
    (book.root / "notebooks/01_a.ipynb").rename(book.root / "notebooks/01_renamed.ipynb")
    with pytest.raises(TranslateError, match=r"01_a.po: no English source notebooks/01_a.ipynb"):
        translate.check(book)
    with pytest.raises(TranslateError, match=r"no English source notebooks/99_x"):
        translate.update(book, add=["notebooks/99_x"])


def test_a_broken_notebook_or_catalogue_is_a_clear_error(book: Edition) -> None:
    book.catalogue("book/intro").write_text("not a catalogue\nmsgid\n")
    with pytest.raises(TranslateError, match=r"intro.po: not a readable PO catalogue"):
        translate.check(book)
    (book.root / "notebooks/01_a.ipynb").write_text("{not json")
    with pytest.raises(TranslateError, match=r"01_a.ipynb: not a readable notebook"):
        translate.source_units(book, "notebooks/01_a")


def test_the_command_exits_non_zero_listing_what_to_translate(
    book: Edition, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(translate, "Edition", lambda: book)
    assert translate.main(["check"]) == 0
    path = book.root / "book/intro.md"
    path.write_text(path.read_text().replace("A paragraph", "An edited paragraph"))
    assert translate.main(["check"]) == 1
    err = capsys.readouterr().err
    assert "book/intro: 1 to fix\n  block intro/1 (stale: its English changed)" in err
    assert "python -m tools.translate update" in err
