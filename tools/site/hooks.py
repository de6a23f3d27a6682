"""mkdocs hooks: serve mermaid from the site itself, so diagrams render without network.

mkdocs-material fetches mermaid from a CDN at view time unless a global ``mermaid`` is already
defined; ``extra_javascript`` in mkdocs.yml loads this copy first. The copy comes from npm
(``tools/site/package.json``, installed by ``scripts/dev.sh``).
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

MERMAID = Path(__file__).parent / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
SITE_PATH = "js/mermaid.min.js"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    if not MERMAID.is_file():
        raise PluginError(
            f"{MERMAID} is missing: build the site with `bash scripts/dev.sh docs` (it installs "
            "the site's npm tools first), or run `npm ci --prefix tools/site` once, so the "
            "site's diagrams render without network."
        )
    files.append(File.generated(config, SITE_PATH, abs_src_path=str(MERMAID)))
    return files
