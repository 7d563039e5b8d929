/*
 * RAG search widget: one <script> tag, no dependencies.
 *
 *   <script src="https://gateway.example/widget.js" defer></script>
 *
 * adds a "Search" button that opens a search panel; results cite their sources
 * as [n]. The gateway is the script's own origin unless data-endpoint says
 * otherwise. The site's origin must be in the gateway's allowlist.
 *
 * Options (data-* attributes on the script tag):
 *   data-endpoint="https://..."  gateway base URL
 *   data-mount="#css-selector"   render inline in that element instead of a panel
 *   data-page-url-field="true"   let the user type the page for "This page" mode
 *   data-debug-toggle="true"     show the debug toggle (provenance, rerank outcome)
 *   data-scope-id="docs"         restrict searches to one scope
 *   data-gate-notice="true"      on load, ask the gateway's /readyz and say so
 *                                when public search is closed by its release
 *                                gate (the gateway's own page does)
 *   data-timeout-s="20"          give up on an answer after this many seconds
 *
 * A search replaces the one still running (its answer, if it comes, is
 * dropped), so the results shown always belong to the last query asked. The
 * page's address goes to the gateway without its query string or fragment
 * (they may hold a session or an e-mail address): "This page" matches the
 * page by origin and path.
 * Everything is rendered with textContent (never innerHTML), so nothing the
 * index or the user supplies can inject markup. Matches in a snippet are
 * <mark> elements (<mark class="ident"> for exact identifiers) built the same
 * way; their offsets count code points, so the text is sliced as
 * Array.from(text), never with the UTF-16 text.slice. The host page can set
 * their colours: --rag-mark-bg, --rag-mark-ident-bg (custom properties cross
 * the shadow root). A hit whose page exists in other languages offers them
 * ("Also in: 中文（中国） / English", each language named in itself); like every
 * link here, only http(s) URLs (absolute, or relative to the page) are linked.
 */
(function () {
  "use strict";

  var script = document.currentScript;
  var data = (script && script.dataset) || {};
  var endpoint = (data.endpoint || (script ? new URL(script.src, location.href).origin : ""))
    .replace(/\/+$/, "");

  var STYLE = [
    ":host{all:initial;color-scheme:light dark;",
    "font:16px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;",
    "color:#1d232b;--accent:#2457c5;--muted:#5b6470;--line:#d9dee5;--soft:#f3f5f8;--warn:#8a4b00}",
    "@media (prefers-color-scheme:dark){:host{color:#e6e9ee;--accent:#8fb1ff;--muted:#a3acb8;",
    "--line:#38404b;--soft:#20262e;--warn:#ffbf69}}",
    "*{box-sizing:border-box}",
    ".rag{display:flex;flex-direction:column;gap:.9rem}",
    "form{display:flex;gap:.5rem}",
    "input[type=search],input[type=url]{flex:1;min-width:0;font:inherit;color:inherit;",
    "background:transparent;padding:.6rem .8rem;border:1px solid var(--line);border-radius:.5rem}",
    "input:focus-visible,button:focus-visible,a:focus-visible{outline:3px solid var(--accent);",
    "outline-offset:2px}",
    "button{font:inherit;cursor:pointer;border-radius:.5rem;border:1px solid var(--accent);",
    "background:var(--accent);color:#fff;padding:.55rem 1.1rem;font-weight:600}",
    "@media (prefers-color-scheme:dark){button{color:#10151c}}",
    "button:disabled{opacity:.6;cursor:progress}",
    ".options{display:flex;flex-wrap:wrap;gap:.4rem 1.2rem;align-items:center;",
    "color:var(--muted);font-size:.9rem}",
    ".options fieldset{border:0;margin:0;padding:0;display:flex;gap:.8rem;align-items:center}",
    ".options legend{float:left;margin-right:.4rem}",
    ".options label{display:inline-flex;gap:.3rem;align-items:center;cursor:pointer}",
    ".page-url{flex-basis:100%;display:flex;gap:.5rem;align-items:center}",
    ".page-url[hidden]{display:none}",
    ".status{margin:0;color:var(--muted);font-size:.92rem;min-height:1.4em}",
    ".status.error{color:var(--warn)}",
    ".results{list-style:none;margin:0;padding:0;display:flex;flex-direction:column;gap:1rem}",
    ".hit{border:1px solid var(--line);border-radius:.6rem;padding:.8rem 1rem;",
    "overflow-wrap:anywhere}",
    ".hit h3{margin:0;font-size:1.05rem;line-height:1.35;display:flex;gap:.5rem;",
    "align-items:baseline}",
    ".hit h3 a{color:var(--accent);text-decoration:none}",
    ".hit h3 a:hover{text-decoration:underline}",
    ".cite{font:600 .8rem/1 ui-monospace,SFMono-Regular,Menlo,monospace;color:var(--accent);",
    "background:var(--soft);border:1px solid var(--line);border-radius:.3rem;padding:.2rem .35rem;",
    "flex:none}",
    ".crumbs{margin:.15rem 0 0;color:var(--muted);font-size:.85rem}",
    ".snippet{margin:.45rem 0 .35rem}",
    "mark{background:var(--rag-mark-bg,#fde68a);color:inherit;border-radius:.2rem;",
    "padding:0 .08rem}",
    "mark.ident{background:var(--rag-mark-ident-bg,#d2e0ff);",
    "box-shadow:inset 0 -2px 0 var(--accent);font-weight:600}",
    "@media (prefers-color-scheme:dark){mark{background:var(--rag-mark-bg,#6b5200)}",
    "mark.ident{background:var(--rag-mark-ident-bg,#27406b)}}",
    "@media (forced-colors:active){mark,mark.ident{background:Mark;color:MarkText}}",
    ".source{margin:0;color:var(--muted);font-size:.82rem;overflow-wrap:anywhere}",
    ".translations{margin:.2rem 0 0;color:var(--muted);font-size:.82rem}",
    ".translations a{color:var(--accent)}",
    ".prov{display:flex;flex-wrap:wrap;gap:.35rem;margin:.5rem 0 0;padding:0;list-style:none}",
    ".prov li{font:.78rem/1.2 ui-monospace,SFMono-Regular,Menlo,monospace;",
    "background:var(--soft);border:1px solid var(--line);border-radius:1rem;padding:.2rem .55rem}",
    ".sources h2,.debug h2{font-size:.95rem;margin:0 0 .4rem}",
    ".sources ol{margin:0;padding-left:2rem;font-size:.9rem;overflow-wrap:anywhere}",
    ".status{overflow-wrap:anywhere}",
    ".sources a{color:var(--accent)}",
    ".debug{border:1px dashed var(--line);border-radius:.6rem;padding:.7rem 1rem;font-size:.88rem}",
    ".debug dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .9rem;margin:0}",
    ".debug dt{color:var(--muted)}.debug dd{margin:0}",
    ".debug table{border-collapse:collapse;margin-top:.5rem;width:100%}",
    ".debug th,.debug td{text-align:left;padding:.2rem .5rem;border-bottom:1px solid var(--line)}",
    "[hidden]{display:none!important}",
    ".sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}",
    ".launcher{position:fixed;right:1.2rem;bottom:1.2rem;z-index:2147483000;",
    "box-shadow:0 4px 14px rgba(0,0,0,.2);border-radius:2rem}",
    ".panel{position:fixed;right:1.2rem;bottom:4.6rem;z-index:2147483000;",
    "width:min(32rem,calc(100vw - 2.4rem));max-height:min(40rem,calc(100vh - 6rem));overflow:auto;",
    "background:Canvas;color:CanvasText;border:1px solid var(--line);border-radius:.8rem;",
    "padding:1rem;box-shadow:0 10px 30px rgba(0,0,0,.25)}",
    ".panel-head{display:flex;justify-content:space-between;align-items:center;margin-bottom:.6rem}",
    ".panel-head h2{margin:0;font-size:1rem}",
    ".close{background:transparent;color:inherit;border-color:var(--line);padding:.2rem .6rem}",
  ].join("");

  var GATE_CLOSED = "Public search is closed until the current index passes its release check.";
  var FRIENDLY = {
    rate_limited: "You are searching very quickly. Please wait {s} s and try again.",
    budget_exhausted: "Search is paused for today (the daily budget is used up).",
    breaker_open: "Search is temporarily unavailable. Please try again in {s} s.",
    release_not_current: GATE_CLOSED,
    origin_not_allowed: "This site is not allowed to use this search service.",
    upstream_timeout: "The search took too long. Please try again.",
    client_timeout: "No answer came in time. Please try again.",
    unreadable: "The search service sent an answer this page cannot read (HTTP {status}).",
    render_failed: "The answer arrived but could not be shown.",
    network: "Could not reach the search service.",
    upstream_unavailable: "The search backend is unavailable right now.",
    page_expired: "The index was just updated. Search again to see the new results.",
    invalid_page_token: "These results can no longer be continued. Please search again.",
  };

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === "text") node.textContent = attrs[key];
      else if (key === "className") node.className = attrs[key];
      else node.setAttribute(key, attrs[key]);
    });
    (children || []).forEach(function (child) { if (child) node.appendChild(child); });
    return node;
  }

  function safeHref(url) {
    // No address is no link: resolved against the page, "" would be this page.
    if (!url || !String(url).trim()) return null;
    try {
      var parsed = new URL(url, location.href);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
    } catch (e) { return null; }
  }

  // "zh-CN" → "中文（中国）": a language named in itself, so its readers find
  // it; the tag as written when the browser cannot name it.
  function languageName(tag) {
    try {
      var name = new Intl.DisplayNames([tag], { type: "language" }).of(tag);
      if (name && name !== tag) return name;
    } catch (e) { /* not a tag this browser knows */ }
    return tag;
  }

  // "Also in: 中文（中国） / English", or null when no translation is linkable.
  function translationLinks(translations) {
    var links = [];
    (Array.isArray(translations) ? translations : []).forEach(function (t) {
      if (!t || typeof t.url !== "string" || !t.url || typeof t.locale !== "string"
        || !t.locale) return;
      var href = safeHref(t.url);
      if (!href) return;
      links.push(el("a", { href: href, hreflang: t.locale, lang: t.locale,
        text: languageName(t.locale) }));
    });
    if (!links.length) return null;
    var nodes = [document.createTextNode("Also in: ")];
    links.forEach(function (link, i) {
      if (i) nodes.push(document.createTextNode(" / "));
      nodes.push(link);
    });
    return el("p", { className: "translations" }, nodes);
  }

  function shortSource(url) {
    try { var u = new URL(url); return u.host + u.pathname; } catch (e) { return url; }
  }

  // "Rate limits" + "Rate limits > Status 429" reads "Rate limits › Status 429".
  function sectionLabel(title, headingPath) {
    var parts = (headingPath || "").split(" > ").filter(Boolean);
    if (parts.length && parts[0] === title) parts.shift();
    return [title].concat(parts).join(" › ");
  }

  // The snippet as text nodes, with each span in a <mark>. Spans count code
  // points (the API's offsets), hence Array.from; bad or overlapping spans
  // from the API are skipped, never trusted to index the text.
  function highlighted(text, spans) {
    var chars = Array.from(text || "");
    var nodes = [];
    var at = 0;
    function piece(start, end) { return chars.slice(start, end).join(""); }
    (Array.isArray(spans) ? spans : []).forEach(function (span) {
      var start = Number(span && span.start);
      var end = Math.min(Number(span && span.end), chars.length);
      if (!Number.isInteger(start) || !Number.isInteger(end) || start < at || end <= start) return;
      if (start > at) nodes.push(document.createTextNode(piece(at, start)));
      var attrs = { text: piece(start, end) };
      if (span.identifier) { attrs.className = "ident"; attrs.title = "Exact identifier match"; }
      nodes.push(el("mark", attrs));
      at = end;
    });
    if (at < chars.length) nodes.push(document.createTextNode(piece(at)));
    return nodes;
  }

  function num(x, digits) { return typeof x === "number" ? x.toFixed(digits) : "–"; }

  function SearchUI(root, options) {
    this.options = options;
    this.lastQuery = "";
    this.timeoutMs = options.timeoutMs;
    this.seq = 0;  // the number of the last search asked: only its answer is shown
    this.inFlight = null;  // { key, abort } of the search still running
    this.waitUntil = 0;  // Date.now() before which the gateway asked us not to search
    this.build(root);
  }

  SearchUI.prototype.build = function (root) {
    var uid = Math.random().toString(36).slice(2, 8);
    this.input = el("input", { type: "search", id: "q-" + uid, name: "q", required: "",
      maxlength: "512", autocomplete: "off", placeholder: "Search the docs…" });
    this.button = el("button", { type: "submit", text: "Search" });
    this.form = el("form", { role: "search", "aria-label": "Site search" }, [
      el("label", { for: "q-" + uid, className: "sr-only", text: "Search query" }),
      this.input, this.button]);
    this.siteRadio = el("input", { type: "radio", name: "mode-" + uid, value: "site" });
    this.siteRadio.checked = true;
    this.pageRadio = el("input", { type: "radio", name: "mode-" + uid, value: "page" });
    this.pageUrl = el("input", { type: "url", "aria-label": "Page URL",
      placeholder: "https://example.com/page", value: location.origin + location.pathname });
    this.pageRow = el("div", { className: "page-url", hidden: "" },
      [el("span", { text: "Page" }), this.pageUrl]);
    this.debugBox = el("input", { type: "checkbox", name: "debug" });
    var mode = el("fieldset", {}, [el("legend", { text: "Search in" }),
      el("label", {}, [this.siteRadio, document.createTextNode("Whole site")]),
      el("label", {}, [this.pageRadio, document.createTextNode("This page")])]);
    var debugLabel = this.options.debugToggle
      ? el("label", {}, [this.debugBox, document.createTextNode("Debug")]) : null;
    var pageRow = this.options.pageUrlField ? this.pageRow : null;
    this.status = el("p", { className: "status", role: "status", "aria-live": "polite" });
    this.results = el("ol", { className: "results", "aria-label": "Results" });
    this.sources = el("section", { className: "sources", hidden: "", "aria-label": "Sources" });
    this.debug = el("section", { className: "debug", hidden: "", "aria-label": "Debug report" });
    this.more = el("button", { type: "button", className: "more", hidden: "",
      text: "More results" });
    root.appendChild(el("div", { className: "rag" }, [this.form,
      el("div", { className: "options" }, [mode, debugLabel, pageRow]),
      this.status, this.results, this.more, this.sources, this.debug]));
    this.bind();
  };

  SearchUI.prototype.bind = function () {
    var self = this;
    this.form.addEventListener("submit", function (event) {
      event.preventDefault();
      self.search(self.input.value);
    });
    var onMode = function () { self.pageRow.hidden = !self.pageRadio.checked; };
    this.siteRadio.addEventListener("change", onMode);
    this.pageRadio.addEventListener("change", onMode);
    this.more.addEventListener("click", function () { self.search(self.lastQuery, self.nextPage); });
    this.debugBox.addEventListener("change", function () {
      if (self.lastQuery) self.search(self.lastQuery);
      else self.debug.hidden = true;
    });
  };

  SearchUI.prototype.payload = function (query) {
    var body = { query: query, debug: this.debugBox.checked };
    // The host page's own address leaves without its query string: it may hold
    // a session id or an e-mail address, and "This page" needs only the path.
    var pageUrl = this.options.pageUrlField ? this.pageUrl.value.trim()
      : location.origin + location.pathname;
    if (pageUrl) body.page_url = pageUrl.split("#")[0].slice(0, 2048);  // the API's bound
    if (this.pageRadio.checked) body.this_page = true;
    if (this.options.scopeId) body.scope = { scope_id: this.options.scopeId };
    return body;
  };

  // `pageToken`: the next page of the last answer (appended, not replacing it).
  // A new search replaces one still running; the same search asked again
  // while it runs (a double click) is not sent twice.
  SearchUI.prototype.search = function (raw, pageToken) {
    var self = this;
    var query = raw.trim();
    if (!query) return;
    if (Date.now() < this.waitUntil) return this.remindWait();
    var body = this.payload(query);
    if (pageToken) body.page_token = pageToken;
    var key = JSON.stringify(body);
    if (this.inFlight && this.inFlight.key === key) return;
    if (this.inFlight) this.inFlight.abort();
    var seq = ++this.seq;
    var call = this.send(body);
    this.inFlight = { key: key, abort: call.abort };
    this.lastQuery = query;
    this.more.disabled = true;
    this.results.setAttribute("aria-busy", "true");
    this.setStatus("Searching…", false);
    call.answer.then(function (result) {
      if (seq !== self.seq) return;  // a newer search owns the panel
      if (!result.ok) return self.showError(result.error, result.retry, Boolean(pageToken));
      try {
        if (pageToken) self.renderMore(result.json);
        else self.render(result.json);
      } catch (e) {
        self.showError({ code: "render_failed" }, null, Boolean(pageToken));
      }
    }).finally(function () {
      if (seq !== self.seq) return;
      self.inFlight = null;
      self.more.disabled = false;
      self.results.removeAttribute("aria-busy");
    });
  };

  // One POST with its own deadline: { answer: Promise of { ok, json } or
  // { ok: false, error, retry }, never rejected; abort: drop it }.
  SearchUI.prototype.send = function (body) {
    var controller = typeof AbortController === "function" ? new AbortController() : null;
    var timedOut = false;
    var timer = controller && setTimeout(function () { timedOut = true; controller.abort(); },
      this.timeoutMs);
    var answer = fetch(endpoint + "/v1/search", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      credentials: "omit",
      signal: controller ? controller.signal : undefined,
    }).then(function (response) { return readAnswer(response, failed); }, failed)
      .finally(function () { clearTimeout(timer); });
    // A body that stops mid-way fails like a request that never answered.
    function failed() {
      return { ok: false, error: { code: timedOut ? "client_timeout" : "network" } };
    }
    return { answer: answer, abort: function () { if (controller) controller.abort(); } };
  };

  // The gateway's JSON, or what to say when the body is not JSON (a proxy's
  // HTML error page, a truncated reply).
  function readAnswer(response, failed) {
    var retry = response.headers.get("Retry-After");
    return response.text().then(function (text) {
      var json = null;
      try { json = JSON.parse(text); } catch (e) { /* not JSON: said below */ }
      if (response.ok && json && Array.isArray(json.hits)) return { ok: true, json: json };
      if (!response.ok && json && json.error) return { ok: false, error: json.error, retry: retry };
      return { ok: false, error: { code: "unreadable", status: response.status }, retry: retry };
    }, failed);
  }

  // The gateway said how long to wait (429, an open breaker): the Search
  // button rests until then, so Retry-After is honoured, not only shown.
  SearchUI.prototype.waitFor = function (seconds) {
    var self = this;
    var ms = Math.min(Math.max(Number(seconds) || 0, 0), 3600) * 1000;
    if (!ms) return;
    this.waitUntil = Date.now() + ms;
    this.button.disabled = true;
    clearTimeout(this.waitTimer);
    this.waitTimer = setTimeout(function () { self.button.disabled = false; }, ms);
  };

  SearchUI.prototype.remindWait = function () {
    var left = Math.ceil((this.waitUntil - Date.now()) / 1000);
    this.setStatus(FRIENDLY.rate_limited.replace("{s}", String(left)), true);
  };

  SearchUI.prototype.setStatus = function (text, isError) {
    this.status.textContent = text;
    this.status.className = isError ? "status error" : "status";
  };

  SearchUI.prototype.clear = function () {
    this.results.replaceChildren();
    this.sources.replaceChildren();
    this.debug.replaceChildren();
    this.sources.hidden = true;
    this.debug.hidden = true;
    this.showMore("");
  };

  SearchUI.prototype.showMore = function (token) {
    this.nextPage = token || "";
    this.more.hidden = !this.nextPage;
  };

  // A later page: its hits continue the list (the ranking is the first
  // page's); citations stay those of the first page's evidence.
  SearchUI.prototype.renderMore = function (data) {
    var self = this;
    data.hits.forEach(function (hit) {
      self.results.appendChild(self.renderHit(Object.assign({}, hit, { citation: null }), data.debug));
    });
    var shown = this.results.children.length;
    this.setStatus(shown + " results.", false);
    this.showMore(data.next_page_token);
  };

  // `keep`: the error came while asking for more: the results shown stay
  // (and "More results" can be pressed again).
  SearchUI.prototype.showError = function (error, retryAfter, keep) {
    if (!keep) this.clear();
    var wait = retryAfter || error.retry_after_s;
    var template = FRIENDLY[error.code] || error.message || "The search failed.";
    this.setStatus(template.replace("{s}", wait || "a few")
      .replace("{status}", String(error.status || "?")), true);
    if (error.code === "rate_limited" || error.code === "breaker_open") this.waitFor(wait);
  };

  SearchUI.prototype.render = function (data) {
    var self = this;
    this.clear();
    var count = data.hits.length;
    var note = (data.message ? " " + data.message : "") + degradedNote(data);
    this.setStatus(count ? count + (count === 1 ? " result." : " results.") + note
      : (data.message || "No results."), false);
    data.hits.forEach(function (hit) { self.results.appendChild(self.renderHit(hit, data.debug)); });
    this.renderSources(data.citations);
    if (data.debug) this.renderDebug(data);
    this.showMore(data.next_page_token);
  };

  // What failed behind this answer, in the gateway's fixed words: shown to
  // everyone, not only in the debug view, so a degraded answer never looks
  // like a healthy one.
  function degradedNote(data) {
    var seen = {};
    var messages = (Array.isArray(data.degraded) ? data.degraded : []).map(function (d) {
      return d && typeof d.message === "string" ? d.message : "";
    }).filter(function (m) { return m && !seen[m] && (seen[m] = true); });
    return messages.length ? " " + messages.join(" ") : "";
  }

  SearchUI.prototype.renderHit = function (hit, debug) {
    var href = safeHref(hit.url);
    var title = href ? el("a", { href: href, text: hit.title || hit.url })
      : el("span", { text: hit.title || hit.doc_id });
    var cite = hit.citation ? el("span", { className: "cite", text: "[" + hit.citation + "]",
      title: "Citation " + hit.citation }) : null;
    var section = sectionLabel(hit.title, hit.heading_path).split(" › ").slice(1).join(" › ");
    var crumbs = section ? el("p", { className: "crumbs", text: section }) : null;
    var lang = typeof hit.locale === "string" && /^[A-Za-z0-9-]{2,35}$/.test(hit.locale)
      ? { lang: hit.locale, dir: "auto" } : { dir: "auto" };
    var item = el("li", { className: "hit" }, [el("article", lang, [
      el("h3", {}, [cite, title]), crumbs,
      el("p", { className: "snippet" }, highlighted(hit.snippet, hit.snippet_highlights)),
      el("p", { className: "source", text: "Source: " + shortSource(hit.url) }),
      translationLinks(hit.translations)])]);
    if (debug) item.firstChild.appendChild(this.renderProvenance(hit));
    return item;
  };

  SearchUI.prototype.renderProvenance = function (hit) {
    var chips = hit.channels.map(function (c) {
      return el("li", { text: c.channel + " #" + c.rank + " · " + num(c.score, 3),
        title: "rank " + c.rank + " in the " + c.channel + " list, its score " + num(c.score, 3) });
    });
    chips.push(el("li", { text: "fused " + num(hit.fused_score, 4),
      title: "reciprocal rank fusion score" }));
    chips.push(el("li", { text: hit.reranked ? "rerank " + num(hit.rerank_score, 3)
      : "not reranked", title: "cross-encoder score" }));
    return el("ul", { className: "prov", "aria-label": "Provenance" }, chips);
  };

  SearchUI.prototype.renderSources = function (citations) {
    if (!citations.length) return;
    var list = el("ol", {}, citations.map(function (c) {
      var href = safeHref(c.url);
      var label = sectionLabel(c.title || c.url, c.heading_path);
      var link = href ? el("a", { href: href, text: label }) : el("span", { text: label });
      return el("li", { value: String(c.number) }, [link]);
    }));
    this.sources.appendChild(el("h2", { text: "Sources" }));
    this.sources.appendChild(list);
    this.sources.hidden = false;
  };

  // "reranker_unavailable: The reranker is unavailable; … (raw reason)".
  function explain(item) {
    return item.code + ": " + item.message + (item.reason ? " (" + item.reason + ")" : "");
  }

  SearchUI.prototype.renderDebug = function (data) {
    // `code` and `message` are always there; `reason` and `model` (the
    // Retriever's own words) only when the gateway trusts its callers.
    var r = data.rerank;
    var rerankText = r.used ? "used (" + r.reranked + "/" + r.candidates + " scored, "
      + num(r.latency_ms, 1) + " ms" + (r.model ? ", " + r.model : "") + ")"
      : "not used — " + explain(r);
    if (r.fallback && r.used) rerankText += "; partial fallback: " + explain(r);
    var rows = [["Intent", data.intent], ["Language", data.query_language || "–"],
      ["Page", data.page_status], ["Rerank", rerankText],
      ["Degraded", data.degraded.map(function (d) { return d.component + ": " + explain(d); })
        .join("; ") || "none"],
      ["Timings", Object.keys(data.timings_ms).map(function (k) {
        return k + " " + num(data.timings_ms[k], 1) + " ms"; }).join(", ") || "–"]];
    var dl = el("dl", {});
    rows.forEach(function (row) {
      dl.appendChild(el("dt", { text: row[0] }));
      dl.appendChild(el("dd", { className: "dbg-" + row[0].toLowerCase(), text: row[1] }));
    });
    var table = el("table", {}, [el("thead", {}, [el("tr", {}, ["Channel", "Status", "Hits", "ms"]
      .map(function (h) { return el("th", { scope: "col", text: h }); }))])]);
    var body = el("tbody", {});
    data.debug.channels.forEach(function (c) {
      body.appendChild(el("tr", {}, [c.channel, c.status + (c.error ? " (" + c.error + ")" : ""),
        String(c.hits), num(c.latency_ms, 1)].map(function (v) { return el("td", { text: v }); })));
    });
    table.appendChild(body);
    this.debug.appendChild(el("h2", { text: "Debug" }));
    this.debug.appendChild(dl);
    this.debug.appendChild(table);
    this.debug.hidden = false;
  };

  function mountInline(target) {
    var shadow = target.attachShadow({ mode: "open" });
    shadow.appendChild(el("style", { text: STYLE }));
    return new SearchUI(shadow, options());
  }

  // The host is an element of its own kind, so the site's `div` rules never
  // draw on it; one floating widget per page (a second script tag reuses it).
  function mountFloating() {
    if (window.RagSearch && document.querySelector("rag-search-widget")) return window.RagSearch;
    var host = el("rag-search-widget", {});
    document.body.appendChild(host);
    var shadow = host.attachShadow({ mode: "open" });
    shadow.appendChild(el("style", { text: STYLE }));
    var launcher = el("button", { className: "launcher", type: "button", "aria-expanded": "false",
      text: "Search" });
    var close = el("button", { className: "close", type: "button", text: "Close",
      "aria-label": "Close search" });
    var panel = el("div", { className: "panel", role: "dialog", "aria-label": "Search",
      hidden: "" }, [el("div", { className: "panel-head" },
      [el("h2", { text: "Search this site" }), close])]);
    shadow.appendChild(launcher);
    shadow.appendChild(panel);
    var ui = new SearchUI(panel, options());
    function toggle(open) {
      panel.hidden = !open;
      launcher.setAttribute("aria-expanded", String(open));
      if (open) ui.input.focus(); else launcher.focus();
    }
    launcher.addEventListener("click", function () { toggle(panel.hidden); });
    close.addEventListener("click", function () { toggle(false); });
    panel.addEventListener("keydown", function (e) { if (e.key === "Escape") toggle(false); });
    return ui;
  }

  function options() {
    var timeoutS = Number(data.timeoutS);
    return { pageUrlField: data.pageUrlField === "true", debugToggle: data.debugToggle === "true",
      scopeId: data.scopeId || "",
      timeoutMs: (timeoutS > 0 && timeoutS <= 600 ? timeoutS : 20) * 1000 };
  }

  // Before any search: a gateway that is up but gated (RAG_GATEWAY_REQUIRE_RELEASE
  // and no passing release check) answers /readyz with status "gated".
  function showGate(ui) {
    fetch(endpoint + "/readyz", { credentials: "omit" }).then(function (response) {
      return response.json();
    }).then(function (state) {
      if (state && state.status === "gated" && !ui.lastQuery) ui.setStatus(GATE_CLOSED, true);
    }).catch(function () { /* a search will say what is wrong */ });
  }

  function start() {
    var target = data.mount ? document.querySelector(data.mount) : null;
    window.RagSearch = target ? mountInline(target) : mountFloating();
    if (data.gateNotice === "true") showGate(window.RagSearch);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
