"""The documentation site, built as users get it and opened in a real headless browser with no
network beyond the site itself (tools/site/check_site.mjs: Chromium from npm, driven by
puppeteer-core)."""

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools" / "site"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built strictly into a temporary directory."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return out


@pytest.fixture(scope="module")
def served(site: Path):
    """The built site on a loopback HTTP server, for as long as the module's tests run."""
    handler = functools.partial(QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-site-server")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def pages_of(site: Path) -> list[str]:
    return sorted(
        "" if page.parent == site else f"{page.parent.relative_to(site).as_posix()}/"
        for page in site.rglob("index.html")
        if page.parent.name not in {"search", "assets"}
    )


# What a reader at 1,280 x 800 must be able to read: diagram labels no smaller than this
# (rendered, after the diagram is scaled to the text column), and no diagram taller than the
# viewport (tools/site/check_site.mjs measures both).
MIN_DIAGRAM_FONT_PX = 11


def test_every_page_works_offline_in_a_real_browser(site: Path, served: str) -> None:
    """Every page loads with no console error, no failed or off-site request, every mermaid
    block rendered to an SVG, every image loaded; at 1,280 px no code block is clipped (its
    content wider than its box), every diagram's labels are legible and it fits the viewport's
    height, and no text shows a literal backslash-pipe (a table's escaped ``|`` left as is);
    the search box finds "burst". With SHOTS_DIR set, each page's screenshot lands there."""
    node = shutil.which("node")
    assert node, "Node.js is needed on PATH for the site's browser test (tools/site)."
    assert (TOOLS / "node_modules" / "puppeteer-core").is_dir(), (
        "tools/site/node_modules is missing: run `npm ci --prefix tools/site` "
        "(scripts/dev.sh does it) to install the headless Chromium and its driver."
    )
    pages = pages_of(site)
    assert "" in pages and "concepts/" in pages and len(pages) >= 15, pages
    done = subprocess.run(
        [node, str(TOOLS / "check_site.mjs"), served, "burst", *pages],
        capture_output=True, text=True, check=False, timeout=600,
    )  # SHOTS_DIR, if set, passes through to it
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{report['browser']}: {len(report['pages'])} pages")
    for page in report["pages"]:
        for diagram in page["layout"]["diagrams"]:
            if diagram["found"]:
                print(f"  /{page['path']} diagram: {diagram['width']} x {diagram['height']} px, "
                      f"smallest label {diagram['smallestFont']}")
    problems = []
    for page in report["pages"]:
        html = (site / page["path"] / "index.html").read_text()
        diagrams = len(re.findall(r'<pre class="mermaid"', html))
        mermaid = page["mermaid"]
        print(f"  /{page['path']}: {len(page['consoleErrors'])} console errors, "
              f"{len(page['failedRequests'])} failed and {len(page['refused'])} off-site "
              f"requests, {mermaid['rendered']}/{diagrams} diagrams as SVG, "
              f"{page['images'] - len(page['brokenImages'])}/{page['images']} images")
        for what in ("consoleErrors", "failedRequests", "refused", "brokenImages"):
            if page[what]:
                problems.append(f"/{page['path']} {what}: {page[what]}")
        if (mermaid["rendered"], mermaid["broken"], mermaid["unrendered"]) != (diagrams, 0, 0):
            problems.append(f"/{page['path']} mermaid: {mermaid} of {diagrams} blocks")
        problems += layout_problems(page)
    assert not problems, "\n".join(problems)
    rendered = {page["path"]: page["mermaid"]["rendered"] for page in report["pages"]}
    assert rendered["concepts/"] >= 2
    assert report["search"]["results"], f"the search box found nothing for 'burst': {report}"
    print(f"  search 'burst': {len(report['search']['results'])} results")


def layout_problems(page: dict) -> list[str]:
    """What check_site.mjs measured at 1,280 x 800 that a reader could not read."""
    layout, where = page["layout"], f"/{page['path']}"
    problems = [f"{where} code block clipped at {layout['viewport']['width']} px "
                f"({code['scrollWidth']} > {code['clientWidth']} px): {code['first']!r}"
                for code in layout["clippedCode"]]
    problems += [f"{where} literal backslash-pipe: {line!r}" for line in layout["backslashPipes"]]
    for number, diagram in enumerate(layout["diagrams"], 1):
        if not diagram["found"]:
            problems.append(f"{where} diagram {number}: no SVG to measure")
            continue
        if diagram["height"] > layout["viewport"]["height"]:
            problems.append(f"{where} diagram {number} is {diagram['height']} px tall, taller "
                            f"than the {layout['viewport']['height']} px viewport")
        smallest = diagram["smallestFont"]
        if smallest is None or smallest["px"] < MIN_DIAGRAM_FONT_PX:
            problems.append(f"{where} diagram {number}: smallest label {smallest} below "
                            f"{MIN_DIAGRAM_FONT_PX} px")
    return problems
