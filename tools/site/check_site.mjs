// Opens every page of the built documentation site in headless Chromium, with every request
// that leaves the site refused (as for a reader offline or behind a firewall), and prints one
// JSON report: per page the console errors, failed or refused requests, the mermaid diagrams
// rendered to SVG, the images that did not load, and the layout at a 1,280 x 800 viewport (code
// blocks whose content is clipped, each diagram's height and smallest rendered font, text
// showing a literal backslash-pipe); then what the search box finds.
//
//   node tools/site/check_site.mjs BASE_URL QUERY PAGE [PAGE ...]
//
// BASE_URL serves the site (loopback); each PAGE is a path below it ("", "concepts/", ...).
// With SHOTS_DIR set, a full-page PNG of each page is saved there (to look at).
import chromium from "@sparticuz/chromium";
import puppeteer from "puppeteer-core";

const [base, query, ...paths] = process.argv.slice(2);
if (!base || !query || paths.length === 0) {
  console.error("usage: node check_site.mjs BASE_URL QUERY PAGE [PAGE ...]");
  process.exit(2);
}
const VIEWPORT = { width: 1280, height: 800 };
const shotsDir = process.env.SHOTS_DIR;
const onSite = (url) => url.startsWith(base) || url.startsWith("data:") || url.startsWith("blob:");

// Rendered mermaid diagrams live in closed shadow roots (mkdocs-material), which only the
// DevTools protocol can see into: count the SVGs under each `div.mermaid` host.
async function mermaidReport(page) {
  const cdp = await page.createCDPSession();
  const { root } = await cdp.send("DOM.getDocument", { depth: -1, pierce: true });
  await cdp.detach();
  const attrs = (node) => {
    const out = {};
    for (let i = 0; i + 1 < (node.attributes || []).length; i += 2) out[node.attributes[i]] = node.attributes[i + 1];
    return out;
  };
  const hosts = [];
  const unrendered = [];
  const walk = (node) => {
    const a = attrs(node);
    const classes = (a.class || "").split(/\s+/);
    if (node.localName === "pre" && classes.includes("mermaid")) unrendered.push(node);
    if (node.localName === "div" && classes.includes("mermaid")) hosts.push(node);
    for (const child of [...(node.children || []), ...(node.shadowRoots || [])]) walk(child);
  };
  walk(root);
  const svgOf = (node) => {
    if (node.localName === "svg") return node;
    for (const child of [...(node.children || []), ...(node.shadowRoots || [])]) {
      const found = svgOf(child);
      if (found) return found;
    }
    return null;
  };
  const rendered = [];
  const broken = [];
  for (const host of hosts) {
    const svg = (host.shadowRoots || []).map(svgOf).find(Boolean);
    if (svg && attrs(svg)["aria-roledescription"] !== "error" && (svg.childNodeCount || 0) > 0) rendered.push(host);
    else broken.push(host);
  }
  return { rendered: rendered.length, broken: broken.length, unrendered: unrendered.length };
}

// Measured in the page. Diagrams are read through their shadow roots, which the page opens
// (see evaluateOnNewDocument below); a label's rendered size is its computed font size times
// the scale at which the diagram's SVG is drawn (its width over its viewBox's).
function layoutReport() {
  const clipped = [...document.querySelectorAll("pre > code")]
    .filter((code) => code.scrollWidth > code.clientWidth + 1)
    .map((code) => ({ first: code.innerText.split("\n")[0].slice(0, 80), scrollWidth: code.scrollWidth, clientWidth: code.clientWidth }));
  const diagrams = [...document.querySelectorAll("div.mermaid")].map((host) => {
    const svg = host.shadowRoot && host.shadowRoot.querySelector("svg");
    if (!svg) return { found: false };
    const box = svg.getBoundingClientRect();
    const viewBox = svg.viewBox && svg.viewBox.baseVal;
    const scale = viewBox && viewBox.width ? box.width / viewBox.width : 1;
    let smallest = null;
    for (const el of svg.querySelectorAll("*")) {
      const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
      if (!own || el.localName === "style") continue;
      const px = parseFloat(getComputedStyle(el).fontSize) * scale;
      if (smallest === null || px < smallest.px) smallest = { px: Math.round(px * 10) / 10, text: el.textContent.trim().slice(0, 60) };
    }
    return { found: true, width: Math.round(box.width), height: Math.round(box.height), smallestFont: smallest };
  });
  const text = document.querySelector(".md-content") ? document.querySelector(".md-content").innerText : document.body.innerText;
  const backslashPipes = text.split("\n").filter((line) => line.includes("\\|")).map((line) => line.slice(0, 120));
  return { viewport: { width: innerWidth, height: innerHeight }, clippedCode: clipped, diagrams, backslashPipes };
}

const browser = await puppeteer.launch({
  executablePath: await chromium.executablePath(),
  args: chromium.args,
  headless: true,
});
const report = { pages: [], search: null, browser: await browser.version() };
try {
  for (const path of paths) {
    const page = await browser.newPage();
    const entry = { path, consoleErrors: [], failedRequests: [], refused: [], mermaid: null, brokenImages: [], images: 0, layout: null };
    await page.setViewport(VIEWPORT);
    // mkdocs-material draws each diagram in a closed shadow root; open ones let layoutReport
    // measure the SVGs with the page's own APIs (nothing else differs).
    await page.evaluateOnNewDocument(() => {
      const attach = Element.prototype.attachShadow;
      Element.prototype.attachShadow = function (init) { return attach.call(this, { ...init, mode: "open" }); };
    });
    page.on("console", (msg) => { if (msg.type() === "error") entry.consoleErrors.push(msg.text()); });
    page.on("pageerror", (err) => entry.consoleErrors.push(String(err)));
    page.on("requestfailed", (req) => {
      if (onSite(req.url())) entry.failedRequests.push(`${req.url()} (${req.failure()?.errorText})`);
    });
    page.on("response", (res) => { if (res.status() >= 400) entry.failedRequests.push(`${res.url()} (HTTP ${res.status()})`); });
    await page.setRequestInterception(true);
    page.on("request", (req) => {
      if (onSite(req.url())) req.continue();
      else { entry.refused.push(req.url()); req.abort("internetdisconnected"); }
    });
    await page.goto(base + path, { waitUntil: "networkidle0", timeout: 60000 });
    // Diagrams render asynchronously after load; wait until no `pre.mermaid` is left (or time out
    // and report what is left).
    await page.waitForFunction(() => document.querySelectorAll("pre.mermaid").length === 0, { timeout: 30000 }).catch(() => {});
    entry.mermaid = await mermaidReport(page);
    const images = await page.evaluate(() => [...document.images].map((img) => ({ src: img.currentSrc || img.src, ok: img.complete && img.naturalWidth > 0 })));
    entry.images = images.length;
    entry.brokenImages = images.filter((img) => !img.ok).map((img) => img.src);
    entry.layout = await page.evaluate(layoutReport);
    if (shotsDir) {
      const name = (path.replace(/\/$/, "").replace(/\//g, "_") || "index") + ".png";
      await page.screenshot({ path: `${shotsDir}/${name}`, fullPage: true });
    }
    report.pages.push(entry);
    await page.close();
  }
  const page = await browser.newPage();
  await page.goto(base + paths[0], { waitUntil: "networkidle0", timeout: 60000 });
  await page.click("label[for=__search]");
  await page.type("input.md-search__input", query, { delay: 20 });
  const found = await page
    .waitForFunction(() => document.querySelectorAll(".md-search-result__item").length > 0, { timeout: 30000 })
    .then(() => page.evaluate(() => [...document.querySelectorAll(".md-search-result__item a")].map((a) => a.getAttribute("href"))))
    .catch(() => []);
  report.search = { query, results: found };
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
