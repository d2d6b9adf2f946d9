"""The website: a clean jupyter-book build, then every page opened in a real headless browser.

The build runs `jupyter-book build --all -W --keep-going .` into `_build/` (any warning fails).
The browser is Debian's chromium (`apt-get install chromium`) driven by Python playwright; the
site is served on 127.0.0.1 from a thread. Screenshots land in `_build/screenshots/`. Without a
Chromium the browser tests are skipped with a message naming what to install, except where the
CI environment variable is set: there a missing browser fails them.

The Chinese edition (zh_CN/, see tools/translate.py) is built the same way, as `make book` does,
into _build/zh_CN and copied to _build/html/zh_CN/; its pages go through the same checks, named
"zh_CN/<page>".

Set BOOK_HTML_DIR=path/to/html to run the browser checks on an already built site (no build).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urldefrag

import nbformat
import pytest
import yaml

from tests.helpers import REPO_ROOT, toc_files

ZH = "zh_CN"  # the Chinese edition: its book in zh_CN/, its pages under _build/html/zh_CN/

BUILD_DIR = REPO_ROOT / "_build"
SCREENSHOT_DIR = BUILD_DIR / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_NAMES = ("chromium", "chromium-browser")  # looked up on PATH when CHROMIUM is absent
MISSING_CHROMIUM = (
    "no Chromium found (neither /usr/bin/chromium nor chromium or chromium-browser on PATH): "
    "install it with `sudo apt-get install chromium` on Debian (elsewhere, your system's Chromium "
    "package) to run the site's browser tests (they drive the system browser; never run "
    "`playwright install`)"
)
CHROMIUM_ARGS = [
    # Every host but the local server fails to resolve, so an external request fails at once
    # (and is recorded by new_page) instead of being intercepted: intercepting every request
    # turns the browser's cache off and made the page visits several times slower.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# Pages with math load MathJax from its CDN; offline it is blocked and its load error is expected.
ALLOWED_EXTERNAL = ("https://cdn.jsdelivr.net/npm/mathjax@",)
SEARCH_WORD = "autograd"
# A glossary term: jieba alone cuts it in two (自动, 求导), the search box sends it whole.
CHINESE_SEARCH_WORD = "自动求导"


def find_chromium() -> str | None:
    """The system Chromium: /usr/bin/chromium, else `chromium` or `chromium-browser` on PATH."""
    if CHROMIUM.is_file():
        return str(CHROMIUM)
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def in_ci() -> bool:
    """Whether the CI environment variable is set (CI services set CI=true; .ci/run runs there)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def chromium_or_skip() -> str:
    """Chromium's path; without one, skip with an install hint, or fail under CI."""
    executable = find_chromium()
    if executable:
        return executable
    if in_ci():
        pytest.fail(f"{MISSING_CHROMIUM}; CI is set, so a missing browser is a failure here")
    pytest.skip(MISSING_CHROMIUM)


def chinese_toc_files() -> list[str]:
    """Every document of the Chinese edition's toc (zh_CN/_toc.yml), as "zh_CN/<doc>"."""
    path = REPO_ROOT / ZH / "_toc.yml"
    if not path.is_file():
        return []
    toc = yaml.safe_load(path.read_text(encoding="utf-8"))
    docs = [toc["root"]] + [ch["file"] for part in toc.get("parts", []) for ch in part["chapters"]]
    return [f"{ZH}/{doc}" for doc in docs]


def site_docs() -> list[str]:
    """Every page of both editions: the English toc, then the Chinese one."""
    return toc_files() + chinese_toc_files()


def is_notebook(doc: str) -> bool:
    return (REPO_ROOT / f"{doc}.ipynb").is_file()


def test_missing_chromium_skips_with_an_install_hint(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setitem(globals(), "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"sudo apt-get install chromium"):
        chromium_or_skip()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI is set"):
        chromium_or_skip()
    monkeypatch.setattr(
        shutil, "which", lambda name: f"fake-bin/{name}" if name == "chromium-browser" else None
    )
    assert chromium_or_skip() == "fake-bin/chromium-browser"


# --- build and serve ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def site_build() -> dict:
    """Build the site clean once per session (or use BOOK_HTML_DIR); returns the build result."""
    if os.environ.get("BOOK_HTML_DIR"):
        return {"html": Path(os.environ["BOOK_HTML_DIR"]).resolve(), "returncode": None, "log": ""}
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    shutil.rmtree(BUILD_DIR / "html", ignore_errors=True)
    shutil.rmtree(BUILD_DIR / ".doctrees", ignore_errors=True)
    commands = [[str(jupyter_book), "build", "--all", "-W", "--keep-going", "."]]
    if chinese_toc_files():  # as `make book`: the Chinese book beside, then under, the English
        commands.append(
            [str(jupyter_book), "build", "--all", "-W", "--keep-going"]
            + ["--path-output", str(BUILD_DIR / ZH), ZH]
        )
    returncode, log = 0, ""
    for command in commands:
        result = subprocess.run(
            command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1200
        )
        returncode, log = returncode or result.returncode, log + result.stdout + result.stderr
    if len(commands) > 1 and (BUILD_DIR / ZH / "_build" / "html").is_dir():
        shutil.copytree(BUILD_DIR / ZH / "_build" / "html", BUILD_DIR / "html" / ZH)
    return {"html": BUILD_DIR / "html", "returncode": returncode, "log": log}


@pytest.fixture(scope="session")
def html_dir(site_build: dict) -> Path:
    html = site_build["html"]
    if not (html / "index.html").is_file():
        pytest.fail(f"no built site in {html.name}/ (index.html missing): see test_build_is_clean")
    return html


@pytest.fixture(scope="session")
def base_url(html_dir: Path):
    """Serve the built site on 127.0.0.1 at a free port from a background thread."""

    class QuietHandler(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    class QuietServer(ThreadingHTTPServer):
        def handle_error(self, request, client_address) -> None:
            if not isinstance(sys.exc_info()[1], ConnectionError):  # the browser dropped a request
                super().handle_error(request, client_address)

    server = QuietServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(html_dir)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_build_is_clean_and_has_every_page(site_build: dict) -> None:
    if site_build["returncode"] is None:
        pytest.skip("BOOK_HTML_DIR is set: checking an existing build, not building")
    log = site_build["log"]
    warnings = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
    assert site_build["returncode"] == 0 and not warnings, (
        "jupyter-book build -W failed:\n" + "\n".join(warnings or log.splitlines()[-40:])
    )
    missing = [doc for doc in site_docs() if not (site_build["html"] / f"{doc}.html").is_file()]
    assert not missing, f"pages in _toc.yml (or zh_CN/_toc.yml) with no HTML page: {missing}"


# --- one pass of the browser over every page ---------------------------------------------------


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: run `pip install -r requirements.txt`")
    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


def new_page(browser, base_url: str, viewport: dict):
    """A page whose console errors and external requests (they fail: CHROMIUM_ARGS) are recorded on it."""
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.errors, page.external = [], []
    favicon = base_url + "favicon.ico"

    def on_request(request) -> None:
        if not request.url.startswith(base_url):
            page.external.append(request.url)

    def on_console(message) -> None:
        url = (message.location or {}).get("url", "")
        # /favicon.ico: the browser asks for one by itself; the site has none and needs none.
        if message.type == "error" and not url.startswith(ALLOWED_EXTERNAL) and url != favicon:
            page.errors.append(f"{message.text} ({url})")

    page.on("request", on_request)
    page.on("console", on_console)
    page.on("pageerror", lambda error: page.errors.append(f"uncaught: {error}"))
    return page


COLLECT_JS = """() => ({
  images: [...document.images].map(i => ({src: i.currentSrc || i.src, ok: i.complete && i.naturalWidth > 0,
                                          output: !!i.closest('.cell_output')})),
  nav: [...document.querySelectorAll('nav.bd-docs-nav a.reference')].map(a => a.href),
  download: [...document.querySelectorAll('a.btn-download-source-button')].map(a => a.href),
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  folded: document.querySelectorAll('.cell.tag_hide-cell, .cell.tag_hide-input').length,
  switch: [...document.querySelectorAll('p.bilingual-switch a')].map(a => a.href),
  lang: document.documentElement.lang,
})"""


@pytest.fixture(scope="session")
def visits(browser, base_url: str, html_dir: Path) -> dict:
    """Open every page of both tocs once at desktop width and record what the checks need."""
    page = new_page(browser, base_url, DESKTOP)
    results = {}
    for doc in site_docs():
        if not (html_dir / f"{doc}.html").is_file():
            results[doc] = None
            continue
        page.errors.clear()
        page.external.clear()
        response = page.goto(base_url + f"{doc}.html", wait_until="load")
        info = page.evaluate(COLLECT_JS)
        info["status"] = response.status if response else None
        info["unfold"] = unfold_solutions(page)
        info["errors"], info["external"] = list(page.errors), list(page.external)
        results[doc] = info
    page.context.close()
    return results


# A folded cell's code must be hidden until its toggle is clicked, then shown. The first folded
# cell of a page is clicked by the browser as a reader clicks it (unfold_solutions); the rest in one
# script, which is the same toggle without the per-click waits (seconds per page otherwise).
UNFOLD_REST_JS = """() => {
  const visible = el => { const box = el.getBoundingClientRect();
                          return box.width > 0 && box.height > 0 && el.checkVisibility({visibilityProperty: true}); };
  const problems = [];
  document.querySelectorAll('.cell.tag_hide-cell, .cell.tag_hide-input').forEach((cell, index) => {
    if (index === 0) return;
    const code = cell.querySelector('.cell_input'), toggle = cell.querySelector('summary');
    if (!code || !toggle) { problems.push(`folded cell ${index + 1} has no code or no toggle`); return; }
    if (visible(code)) { problems.push(`folded cell ${index + 1} shows its code before a click`); return; }
    toggle.click();
    if (!visible(code)) problems.push(`folded cell ${index + 1} does not open when clicked`);
  });
  return problems;
}"""


def unfold_solutions(page) -> list[str]:
    """Check each folded cell hides its code until its toggle is clicked; return the problems."""
    problems = []
    cells = page.locator(".cell.tag_hide-cell, .cell.tag_hide-input")
    if cells.count():
        code = cells.first.locator(".cell_input")
        if code.is_visible():
            problems.append("folded cell 1 shows its code before a click")
        else:
            cells.first.locator("summary").first.click()
            if not code.is_visible():
                problems.append("folded cell 1 does not open when clicked")
    return problems + page.evaluate(UNFOLD_REST_JS)


def folded_cell(open_: bool = False, stuck: bool = False, n: int = 1) -> str:
    """A folded cell as jupyter-book writes one; `open_` shows its code, `stuck` ignores clicks."""
    details = (
        '<details class="hide above-input" open>' if open_ else '<details class="hide above-input">'
    )
    summary = '<summary onclick="event.preventDefault()">' if stuck else "<summary>"
    code = f'<div class="cell_input"><pre>print({n})</pre></div>'
    return f'<div class="cell tag_hide-cell">{details}{summary}Show code cell</summary>{code}</details></div>'


def test_the_page_checks_find_folding_problems_and_external_requests(
    browser, base_url: str
) -> None:
    page = new_page(browser, base_url, DESKTOP)
    page.set_content(folded_cell(n=1) + folded_cell(n=2) + folded_cell(n=3), wait_until="load")
    assert unfold_solutions(page) == []
    cells = [folded_cell(open_=True, n=1), folded_cell(n=2), folded_cell(open_=True, n=3)]
    page.set_content("".join(cells + [folded_cell(stuck=True, n=4)]), wait_until="load")
    assert unfold_solutions(page) == [
        "folded cell 1 shows its code before a click",
        "folded cell 3 shows its code before a click",
        "folded cell 4 does not open when clicked",
    ]
    page.set_content(folded_cell(stuck=True), wait_until="load")
    assert unfold_solutions(page) == ["folded cell 1 does not open when clicked"]
    page.set_content('<img src="https://example.org/logo.png">', wait_until="load")
    assert page.external == ["https://example.org/logo.png"]
    assert page.evaluate("document.images[0].naturalWidth") == 0  # it failed: no network used
    page.context.close()


def existing(visits: dict) -> dict:
    missing = [doc for doc, info in visits.items() if info is None]
    assert not missing, f"pages in _toc.yml missing from the built site: {missing}"
    return visits


def test_every_page_loads_without_console_errors(visits: dict) -> None:
    problems = {}
    for doc, info in existing(visits).items():
        unexpected = [u for u in info["external"] if not u.startswith(ALLOWED_EXTERNAL)]
        found = ([f"HTTP {info['status']}"] if info["status"] != 200 else []) + info["errors"]
        found += [f"external request: {u}" for u in unexpected]
        if found:
            problems[doc] = found
    assert not problems, json.dumps(problems, indent=1)


def test_every_image_has_loaded(visits: dict) -> None:
    broken = {
        doc: [image["src"] for image in info["images"] if not image["ok"]]
        for doc, info in existing(visits).items()
    }
    broken = {doc: srcs for doc, srcs in broken.items() if srcs}
    assert not broken, f"images that did not load: {broken}"


def test_plots_are_rendered_as_images(visits: dict) -> None:
    """Each stored image output of a notebook shows up as an <img> in its page."""
    mismatched = {}
    for doc, info in existing(visits).items():
        if not is_notebook(doc):
            continue
        nb = nbformat.read(REPO_ROOT / f"{doc}.ipynb", as_version=4)
        stored = sum(
            1
            for cell in nb.cells
            for output in cell.get("outputs", [])
            if any(key.startswith("image/") for key in output.get("data", {}))
        )
        shown = sum(1 for image in info["images"] if image["output"])
        if shown != stored:
            mismatched[doc] = f"{stored} image outputs stored, {shown} shown"
    assert not mismatched, mismatched


def test_navigation_lists_every_chapter(visits: dict, base_url: str) -> None:
    english = {base_url + f"{doc}.html" for doc in toc_files()[1:]}
    chinese = {base_url + f"{doc}.html" for doc in chinese_toc_files()[1:]}
    problems = {}
    for doc, info in existing(visits).items():
        expected = chinese if doc.startswith(f"{ZH}/") else english
        listed = {urldefrag(href).url for href in info["nav"]}
        if expected - listed:
            problems[doc] = sorted(u.removeprefix(base_url) for u in expected - listed)
    assert not problems, f"chapters missing from the side navigation: {problems}"


def test_each_chapter_page_offers_its_notebook_download(visits: dict, base_url: str) -> None:
    problems = {}
    for doc, info in existing(visits).items():
        if not is_notebook(doc):
            continue
        wanted = [h for h in info["download"] if h.endswith(f"/{Path(doc).name}.ipynb")]
        if not wanted:
            problems[doc] = "no .ipynb download link"
            continue
        with urllib.request.urlopen(wanted[0], timeout=10) as response:
            nbformat.validate(nbformat.reads(response.read().decode(), as_version=4))
    assert not problems, problems


def test_exercise_solutions_are_folded(visits: dict) -> None:
    problems, folded = {}, 0
    for doc, info in existing(visits).items():
        if not is_notebook(doc):
            continue
        nb = nbformat.read(REPO_ROOT / f"{doc}.ipynb", as_version=4)
        tagged = sum(
            1
            for cell in nb.cells
            if {"hide-cell", "hide-input"} & set(cell.metadata.get("tags", []))
        )
        folded += info["folded"]
        if info["folded"] != tagged:
            problems[doc] = [f"{tagged} cells tagged hide-cell/hide-input, {info['folded']} folded"]
        if info["unfold"]:
            problems.setdefault(doc, []).extend(info["unfold"])
    assert not problems, problems
    assert folded > 0, "no folded exercise solution anywhere in the book"


def test_internal_links_resolve(visits: dict, base_url: str) -> None:
    links = {
        urldefrag(href).url
        for info in existing(visits).values()
        for href in info["links"]
        if href.startswith(base_url)
    }
    broken = []
    for url in sorted(links):
        try:
            with urllib.request.urlopen(url, timeout=10):
                pass
        except urllib.error.HTTPError as error:
            broken.append(f"{url.removeprefix(base_url)} ({error.code})")
    assert not broken, f"broken links: {broken}"


def test_each_page_links_to_its_other_edition(visits: dict, base_url: str) -> None:
    """A Chinese page links to its English page; an English page links to its Chinese page
    exactly when there is one. Chinese pages say lang="zh-CN", so the browser picks CJK fonts."""
    chinese, problems = set(chinese_toc_files()), {}
    assert chinese, "no Chinese edition (zh_CN/_toc.yml): run `python -m tools.translate build`"
    for doc, info in existing(visits).items():
        if doc in chinese:
            expected = [base_url + doc.removeprefix(f"{ZH}/") + ".html"]
            if info["lang"] != "zh-CN":
                problems[doc] = f'<html lang="{info["lang"]}">, not zh-CN'
        else:
            expected = [base_url + f"{ZH}/{doc}.html"] if f"{ZH}/{doc}" in chinese else []
        if info["switch"] != expected:
            problems[doc] = f"language link {info['switch']}, expected {expected}"
    assert not problems, problems


@pytest.mark.parametrize(
    ("edition", "word"),
    [("", SEARCH_WORD), (f"{ZH}/", SEARCH_WORD), (f"{ZH}/", CHINESE_SEARCH_WORD)],
    ids=["english", "chinese-latin", "chinese"],
)
def test_search_finds_a_term(
    browser, base_url: str, html_dir: Path, edition: str, word: str
) -> None:
    if edition and not (html_dir / edition / "search.html").is_file():
        pytest.skip("no Chinese edition built")
    page = new_page(browser, base_url, DESKTOP)
    page.goto(base_url + f"{edition}search.html?q={word}", wait_until="load")
    results = page.locator("#search-results ul.search li")
    try:
        results.first.wait_for(state="attached", timeout=15_000)
    except Exception:
        summary = page.locator("#search-results").inner_text()
        pytest.fail(
            f"search for {word!r} in {edition or 'the English edition'} found nothing: {summary!r}; {page.errors}"
        )
    assert results.count() > 0
    assert not page.errors, page.errors
    page.context.close()


def test_pages_fit_a_phone_screen(browser, base_url: str, html_dir: Path) -> None:
    """At 390 px nothing makes the page scroll sideways (wide code scrolls inside its own box)."""
    page = new_page(browser, base_url, PHONE)
    too_wide = {}
    for doc in site_docs():
        if (html_dir / f"{doc}.html").is_file():
            page.goto(base_url + f"{doc}.html", wait_until="load")
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > PHONE["width"]:
                too_wide[doc] = width
    page.context.close()
    assert not too_wide, f"pages wider than {PHONE['width']} px on a phone: {too_wide}"


def page_title(doc: str) -> str:
    """The title a page's <h1> shows: the first `# ` line of its notebook or Markdown source."""
    if is_notebook(doc):
        source = nbformat.read(REPO_ROOT / f"{doc}.ipynb", as_version=4).cells[0].source
    else:
        source = (REPO_ROOT / f"{doc}.md").read_text(encoding="utf-8")
    title = next(line for line in source.splitlines() if line.startswith("# "))
    return title.removeprefix("# ").replace("`", "").strip()


def drawn_share(path: Path) -> float:
    """The share of a screenshot's pixels that differ from its most common colour (the
    background): about 0 for a blank page, a few percent for a page of text."""
    from PIL import Image

    with Image.open(path) as image:
        pixels = image.convert("RGB")
        colours = pixels.getcolors(maxcolors=pixels.width * pixels.height)
    background = max(count for count, _ in colours)
    return 1 - background / (pixels.width * pixels.height)


MIN_DRAWN = 0.05  # a blank page, or one showing only its title, has under 2%; a real one over 10%


def test_drawn_share_tells_a_blank_page_from_a_drawn_one(tmp_path: Path) -> None:
    from PIL import Image, ImageDraw

    blank, drawn = tmp_path / "blank.png", tmp_path / "drawn.png"
    Image.new("RGB", (100, 100), "white").save(blank)
    image = Image.new("RGB", (100, 100), "white")
    ImageDraw.Draw(image).rectangle((0, 0, 9, 99), fill="black")  # 10 of 100 columns
    image.save(drawn)
    assert drawn_share(blank) == 0
    assert drawn_share(drawn) == pytest.approx(0.1)


def test_screenshots(browser, base_url: str, html_dir: Path) -> None:
    """Landing page, chapter 05, the run report and chapter 01 in Chinese (its characters must
    show as characters, not boxes) at desktop and phone width, for human eyes.

    Each is taken after the page shows its own title, and must not be blank; the folder is
    emptied first, so what is checked is what this run wrote."""
    shutil.rmtree(SCREENSHOT_DIR, ignore_errors=True)
    SCREENSHOT_DIR.mkdir(parents=True)
    docs = {
        "landing": toc_files()[0],
        "chapter05": "notebooks/05_convolutions",
        "run_report": "book/run_report",
        "zh_chapter01": f"{ZH}/notebooks/01_tensors_and_autograd",
    }
    written, problems = [], {}
    for name, doc in docs.items():
        if not (html_dir / f"{doc}.html").is_file():
            pytest.fail(f"{doc}.html is missing from the built site")
        for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            page = new_page(browser, base_url, viewport)
            page.goto(base_url + f"{doc}.html", wait_until="load")
            heading = page.locator("article h1").first
            shown = heading.inner_text() if heading.count() else "(no <h1> in the article)"
            if page_title(doc) not in shown or not heading.is_visible():
                problems[f"{name}_{label}"] = f"title {page_title(doc)!r} not shown, got {shown!r}"
            shots = [(SCREENSHOT_DIR / f"{name}_{label}.png", None)]
            folded = page.locator(".cell.tag_hide-cell, .cell.tag_hide-input")
            if name == "chapter05" and folded.count():
                shots.append((SCREENSHOT_DIR / f"{name}_exercise_{label}.png", folded.first))
            for path, target in shots:
                if target is not None:
                    target.scroll_into_view_if_needed()
                page.screenshot(path=str(path))
                written.append(path)
            page.context.close()
    assert not problems, problems
    assert "chapter05_exercise_desktop.png" in {path.name for path in written}, (
        "chapter 05 shows no folded exercise solution to photograph"
    )
    assert sorted(SCREENSHOT_DIR.glob("*.png")) == sorted(written)
    blank = {p.name: f"{drawn_share(p):.1%} drawn" for p in written if drawn_share(p) < MIN_DRAWN}
    assert not blank, f"screenshots of (nearly) blank pages: {blank}"


def test_site_has_a_search_index(html_dir: Path) -> None:
    index = html_dir / "searchindex.js"
    assert index.is_file(), "searchindex.js missing: the search page cannot work"
    assert re.search(SEARCH_WORD, index.read_text(), re.IGNORECASE)


def test_chinese_search_index_holds_chinese_words(html_dir: Path) -> None:
    """Chinese has no spaces: without jieba (requirements.txt) the index holds the Latin words only."""
    index = html_dir / ZH / "searchindex.js"
    if not index.is_file():
        pytest.skip("no Chinese edition built")
    text = index.read_text(encoding="utf-8")
    terms = json.loads(text[text.index("(") + 1 : text.rindex(")")])["terms"]
    missing = [
        word for word in (CHINESE_SEARCH_WORD, "张量", "混合精度", "检查点") if word not in terms
    ]
    assert not missing, (
        f"the Chinese search index lacks {missing}: is jieba installed (make setup)?"
    )
