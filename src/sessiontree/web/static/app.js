// sessiontree viewer: the session page's tree (virtual list, folds, filters),
// branch and view switching, permalinks and live updates. Plain ES2017, no
// build step. Session text is only ever put into the page with textContent;
// conversation HTML comes from the server's templates (escaped there) or from
// the export's <template> elements (rendered by the same templates).
(function () {
  "use strict";
  var body = document.body;
  if (!body || !body.classList.contains("session-page")) return;

  // Row fields and flags: see sessiontree/web/view.py (TreeData, F_*).
  var ID = 0, DEPTH = 1, KIND = 2, SUMMARY = 3, FLAGS = 4, LABEL = 5, PARENT = 6, END = 7, TIP = 8;
  var F_ACTIVE = 1, F_LEAF = 2, F_RETIRED = 4, F_COMPACTION = 8, F_BRANCH_SUMMARY = 16, F_TOOL = 32,
      F_USER = 64, F_META = 128, F_BRANCH_POINT = 256, F_BRANCH_START = 512;
  var ROW_H = 20, INDENT = 14, OVERSCAN = 30;
  // Rows indent by branch nesting, up to MAX_LEVELS; deeper rows say their level instead
  // of moving right, so no row is pushed off the pane (docs/viewer.md, "The tree").
  var MAX_LEVELS = 12;

  var mode = body.dataset.mode;            // "server" or "static" (the HTML export)
  var sessionId = body.dataset.session;
  var token = body.dataset.token || "";    // "?token=..." when the server requires one
  var treeEl = document.getElementById("tree");
  var innerEl = document.getElementById("tree-inner");
  var convEl = document.getElementById("conv");
  var countEl = document.getElementById("tree-count");
  var filterEl = document.getElementById("tree-filter");
  var branchEl = document.getElementById("branch-select");
  var leafLink = document.getElementById("leaf-link");
  var compareLink = document.getElementById("compare-link");

  // The server's page carries one window of visible rows ({windowed: true, total,
  // offset, found, rows: [[row, id, depth, kind, summary, flags, label, tip id,
  // branches, foldable, on path], ...]}) and the script asks /rows.json for the
  // others as the tree scrolls; the export carries every row (TreeData.rows) and
  // the script makes the same windows itself.
  var data = JSON.parse(document.getElementById("tree-data").textContent);
  var windowed = !!data.windowed;
  var rows = windowed ? [] : data.rows, index = {}, folded = {};
  var W_ROW = 0, W_ID = 1, W_DEPTH = 2, W_KIND = 3, W_SUMMARY = 4, W_FLAGS = 5, W_LABEL = 6, W_TIP = 7,
      W_BRANCHES = 8, W_FOLDABLE = 9, W_PATH = 10;
  var CHUNK = 200;
  // The rows known for the current filter, folds and branch: position -> row.
  var tv = { key: "", total: 0, entries: 0, cache: {}, asked: {} };
  var state = { leaf: null, view: "raw", target: null };
  var head = convEl.querySelector(".conv-head");
  state.leaf = head ? head.dataset.leaf || null : data.leaf;
  state.view = head ? head.dataset.view : "raw";

  function reindex() {
    index = {};
    for (var i = 0; i < rows.length; i++) index[rows[i][ID]] = i;
  }

  function keep(row, filter) {
    var f = row[FLAGS];
    if (filter === "all") return true;
    if (filter === "user-only") return (f & F_USER) !== 0;
    if (filter === "labeled-only") return row[LABEL] !== null;
    if (f & F_META) return false;
    if (filter === "no-tools" && (f & F_TOOL)) return false;
    return true;
  }

  function foldedList() {
    return Object.keys(folded).filter(function (k) { return folded[k]; }).sort(function (a, b) { return a - b; }).join(",");
  }

  // The export's windows, made here with the rule the server applies (view.TreeData.window).
  function localQuery(q) {
    var visible = [];
    for (var i = 0; i < rows.length; i++) {
      var row = rows[i];
      if (keep(row, q.filter) || (row[FLAGS] & F_LEAF)) visible.push(i);
      if (folded[i]) i = row[END];
    }
    var path = {}, p = index[q.leaf], guard = 0;
    while (p !== undefined && p >= 0 && guard++ <= rows.length) { path[p] = true; p = rows[p][PARENT]; }
    var found = q.find !== null && index[q.find] !== undefined ? visible.indexOf(index[q.find]) : -1;
    var out = [];
    for (var k = 0; k < visible.length; k++) {
      var j = visible[k], r = rows[j], n = 0;
      if (r[FLAGS] & F_BRANCH_POINT) for (var c = j + 1; c <= r[END]; c = rows[c][END] + 1) n++;
      out.push([j, r[ID], r[DEPTH], r[KIND], r[SUMMARY], r[FLAGS], r[LABEL], rows[r[TIP]][ID], n,
                r[END] > j && (r[FLAGS] & (F_BRANCH_POINT | F_BRANCH_START)) ? 1 : 0, path[j] ? 1 : 0]);
    }
    return Promise.resolve({ total: visible.length, entries: rows.length, offset: 0, found: found, rows: out });
  }

  function query(q) {
    if (!windowed) return localQuery(q);
    var u = "/s/" + encodeURIComponent(sessionId) + "/rows.json?filter=" + encodeURIComponent(q.filter) +
      "&folded=" + foldedList() + "&leaf=" + encodeURIComponent(q.leaf || "") + "&offset=" + q.offset +
      "&limit=" + q.limit + (q.find ? "&find=" + encodeURIComponent(q.find) : "") +
      (token ? "&" + token.replace(/^\?/, "") : "");
    return fetch(u, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    });
  }

  function treeKey() { return filterEl.value + "|" + foldedList() + "|" + (state.leaf || ""); }

  // Take a window of rows if it still answers the current filter, folds and branch.
  function accept(d, key) {
    if (key !== tv.key) return false;
    tv.total = d.total; tv.entries = d.entries;
    for (var k = 0; k < d.rows.length; k++) tv.cache[d.offset + k] = d.rows[k];
    innerEl.style.height = (tv.total * ROW_H) + "px";
    countEl.textContent = tv.total + " of " + tv.entries + " entries";
    return true;
  }

  function need(pos) {
    var chunk = Math.floor(pos / CHUNK), key = tv.key;
    if (!windowed || tv.asked[chunk]) return;
    tv.asked[chunk] = true;
    query({ filter: filterEl.value, leaf: state.leaf, offset: chunk * CHUNK, limit: CHUNK, find: null })
      .then(function (d) { if (accept(d, key)) render(true); })
      .catch(function () { if (key === tv.key) delete tv.asked[chunk]; });
  }

  function drawRow(r, pos) {
    var f = r[W_FLAGS];
    var el = document.createElement("div");
    el.className = "row" + (f & F_ACTIVE ? " on-path" : "") + (f & F_LEAF ? " leaf" : "") +
      (r[W_PATH] ? " selected-path" : "") + (r[W_ID] === state.target ? " current" : "") +
      (f & F_RETIRED ? " retired" : "") + (f & F_COMPACTION ? " compaction" : "") +
      (f & F_BRANCH_SUMMARY ? " branch_summary" : "");
    el.style.top = (pos * ROW_H) + "px";
    el.style.paddingLeft = (4 + Math.min(r[W_DEPTH], MAX_LEVELS) * INDENT) + "px";
    el.dataset.pos = pos;
    el.dataset.row = r[W_ROW];
    var fold = document.createElement("span");
    fold.className = "fold";
    if (r[W_FOLDABLE]) { fold.textContent = folded[r[W_ROW]] ? "▸" : "▾"; fold.dataset.fold = r[W_ROW]; }
    el.appendChild(fold);
    if (r[W_DEPTH] > MAX_LEVELS) {
      var deep = document.createElement("span"); deep.className = "deep";
      deep.textContent = "↳" + r[W_DEPTH] + " "; deep.title = "branch level " + r[W_DEPTH]; el.appendChild(deep);
    }
    var id = document.createElement("span"); id.className = "id"; id.textContent = r[W_ID] + " ";
    var kind = document.createElement("span"); kind.className = "kind " + r[W_KIND];
    kind.textContent = (f & F_RETIRED ? "retired " : "") + r[W_KIND];
    el.appendChild(id); el.appendChild(kind);
    if (r[W_LABEL] !== null) { var lab = document.createElement("span"); lab.className = "lab"; lab.textContent = r[W_LABEL]; el.appendChild(lab); }
    if (f & F_BRANCH_POINT) {
      var bp = document.createElement("span"); bp.className = "bp";
      bp.textContent = r[W_BRANCHES] + " branches"; el.appendChild(bp);
    }
    el.appendChild(document.createTextNode(" " + (r[W_SUMMARY] === null ? "" : r[W_SUMMARY])));
    el.title = r[W_ID] + (f & F_LEAF ? " (active leaf)" : "");
    return el;
  }

  function placeholder(pos) {
    var el = document.createElement("div");
    el.className = "row pending";
    el.style.top = (pos * ROW_H) + "px";
    el.textContent = "…";
    return el;
  }

  var drawn = "";
  function render(force) {
    var first = Math.max(0, Math.floor(treeEl.scrollTop / ROW_H) - OVERSCAN);
    var last = Math.min(tv.total, Math.ceil((treeEl.scrollTop + treeEl.clientHeight) / ROW_H) + OVERSCAN);
    var key = first + ":" + last;
    if (!force && key === drawn) return;
    drawn = key;
    var frag = document.createDocumentFragment();
    for (var k = first; k < last; k++) {
      var r = tv.cache[k];
      if (r) frag.appendChild(drawRow(r, k)); else { frag.appendChild(placeholder(k)); need(k); }
    }
    innerEl.replaceChildren(frag);
  }

  function scrollToPos(pos) {
    var y = pos * ROW_H;
    if (y < treeEl.scrollTop || y > treeEl.scrollTop + treeEl.clientHeight - ROW_H)
      treeEl.scrollTop = Math.max(0, y - treeEl.clientHeight / 2);
  }

  // Show the tree for the current filter, folds and branch; centre on entry
  // ``scrollTo`` when it is visible and off screen.
  function refreshTree(scrollTo) {
    var key = treeKey();
    if (key !== tv.key) { tv.key = key; tv.cache = {}; tv.asked = {}; }
    var q = { filter: filterEl.value, leaf: state.leaf, offset: Math.floor(treeEl.scrollTop / ROW_H),
              limit: CHUNK, find: scrollTo || null };
    return query(q).then(function (d) {
      if (!accept(d, key)) return;
      if (d.found >= 0) scrollToPos(d.found);
      render(true);
    }).catch(function () {});
  }

  // ------------------------------------------------------------------ conversation

  function url(leaf, view, target) {
    var q = "?leaf=" + encodeURIComponent(leaf || "") + "&view=" + view;
    if (token) q += "&" + token.replace(/^\?/, "");
    return q + (target ? "#" + encodeURIComponent(target) : "");
  }

  function showTarget(target) {
    var old = convEl.querySelector(".item.target");
    if (old) old.classList.remove("target");
    if (!target) { convEl.scrollTop = convEl.scrollHeight; return; }
    var el = document.getElementById(target);
    if (el && convEl.contains(el)) {
      // A folded annotation or subagent step: open the folds around it first.
      for (var d = el.parentElement; d && d !== convEl; d = d.parentElement) if (d.tagName === "DETAILS") d.open = true;
      var item = el.closest(".item") || el;
      item.classList.add("target");
      el.scrollIntoView({ block: "center" });
    }
  }

  function setConversation(html) {
    convEl.innerHTML = html;  // our own escaped template output, never raw session text
  }

  function load(leaf, view, target, push) {
    state.leaf = leaf; state.view = view; state.target = target || null;
    if (branchEl) branchEl.value = leaf;
    if (leafLink) leafLink.href = url(leaf, view, null);
    if (compareLink) {  // the compare page of the shown branch against the active one
      compareLink.href = compareLink.pathname + "?b=" + encodeURIComponent(leaf) + (view === "model" ? "&view=model" : "");
    }
    document.getElementById(view === "model" ? "view-model" : "view-raw").checked = true;
    if (push) history.pushState({ leaf: leaf, view: view, target: target }, "", url(leaf, view, target));
    refreshTree(target || leaf);
    if (mode === "static") {
      var tpl = document.querySelector('template[data-leaf="' + CSS.escape(leaf) + '"][data-view="' + view + '"]');
      if (tpl) { convEl.replaceChildren(tpl.content.cloneNode(true)); }
      else {
        var p = document.createElement("p"); p.className = "missing-branch";
        p.textContent = "This branch is not included in the exported file; use `sessiontree serve` to see it.";
        convEl.replaceChildren(p);
      }
      showTarget(target);
      return Promise.resolve();
    }
    var q = "/s/" + encodeURIComponent(sessionId) + "/conversation" + url(leaf, view, null) +
      (target ? "&around=" + encodeURIComponent(target) : "");
    return fetch(q, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.text();
    }).then(function (html) { setConversation(html); showTarget(target); });
  }

  treeEl.addEventListener("scroll", function () { render(false); });
  window.addEventListener("resize", function () { render(true); });
  treeEl.addEventListener("click", function (ev) {
    var foldEl = ev.target.closest("[data-fold]");
    if (foldEl) { var i = +foldEl.dataset.fold; folded[i] = !folded[i]; refreshTree(); return; }
    var rowEl = ev.target.closest(".row");
    if (!rowEl || rowEl.dataset.pos === undefined) return;
    var r = tv.cache[+rowEl.dataset.pos];
    if (r) load(r[W_TIP], state.view, r[W_ID], true);
  });
  filterEl.addEventListener("change", function () { refreshTree(state.target || state.leaf); });
  document.getElementById("tree-unfold").addEventListener("click", function () { folded = {}; refreshTree(); });
  var copyEl = document.getElementById("resume-copy");
  if (copyEl) copyEl.addEventListener("click", function () {
    var text = document.getElementById("resume-command").textContent;
    if (navigator.clipboard) navigator.clipboard.writeText(text).then(function () { copyEl.textContent = "copied"; });
  });
  document.getElementById("view-raw").addEventListener("change", function () { load(state.leaf, "raw", state.target, true); });
  document.getElementById("view-model").addEventListener("change", function () { load(state.leaf, "model", state.target, true); });
  if (branchEl) branchEl.addEventListener("change", function () { load(branchEl.value, state.view, null, true); });
  window.addEventListener("popstate", function (ev) {
    var s = ev.state || {};
    load(s.leaf || data.leaf, s.view || "raw", s.target || null, false);
  });
  // Earlier messages of the branch, inserted above the shown ones (the button, or
  // scrolling near the top, asks for them).
  function loadEarlier(more) {
    if (more.disabled) return;
    more.disabled = true;
    var q = "/s/" + encodeURIComponent(sessionId) + "/conversation" + url(state.leaf, state.view, null) +
      "&start=" + encodeURIComponent(more.dataset.start) + "&stop=" + encodeURIComponent(more.dataset.stop || "");
    fetch(q, { credentials: "same-origin" }).then(function (r) {
      // Only our template output goes into the page: never an error body (plain text
      // that may quote the session, e.g. "Cannot show this session: ...").
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.text();
    }).then(function (html) {
      if (!more.isConnected) return;  // the branch or view changed meanwhile
      var tmp = document.createElement("div");
      tmp.innerHTML = html;  // escaped template output
      var oldHead = tmp.querySelector(".conv-head"); if (oldHead) oldHead.remove();
      var height = convEl.scrollHeight;
      more.replaceWith.apply(more, Array.prototype.slice.call(tmp.childNodes));
      convEl.scrollTop += convEl.scrollHeight - height;
    }).catch(function () { more.disabled = false; });
  }
  convEl.addEventListener("scroll", function () {
    if (mode !== "server" || convEl.scrollTop > 400) return;
    var more = convEl.querySelector("button.earlier");
    if (more) loadEarlier(more);
  });
  convEl.addEventListener("click", function (ev) {
    var more = ev.target.closest("button.earlier");
    if (more && mode === "server") { loadEarlier(more); return; }
    var anchor = ev.target.closest("a.anchor");
    if (anchor) {
      ev.preventDefault();
      var id = anchor.dataset.target;  // the entry id as is (the href has it URL-encoded)
      history.pushState({ leaf: state.leaf, view: state.view, target: id }, "", url(state.leaf, state.view, id));
      state.target = id; showTarget(id); refreshTree(id);
    }
  });

  // ------------------------------------------------------------------ start

  // The entry a URL's fragment names. A malformed escape ("#%E0%A4%A") must not
  // stop the page: decodeURIComponent throws on it, so the raw text is used.
  function fragment() {
    var raw = location.hash.replace(/^#/, "");
    try { return decodeURIComponent(raw) || null; } catch (e) { return raw || null; }
  }

  reindex();
  var params = new URLSearchParams(location.search);
  var hash = fragment();
  state.target = hash;
  if (mode === "static") {
    // The export carries the active branch's raw view once, in the pane: kept as its
    // template so switching back to it finds it (docs/viewer.md, "Export").
    if (head && !document.querySelector('template[data-leaf="' + CSS.escape(state.leaf || "") + '"][data-view="raw"]')) {
      var keepTpl = document.createElement("template");
      keepTpl.dataset.leaf = state.leaf || ""; keepTpl.dataset.view = "raw";
      keepTpl.content.append.apply(keepTpl.content, Array.prototype.slice.call(convEl.childNodes).map(function (n) { return n.cloneNode(true); }));
      document.body.appendChild(keepTpl);
    }
    var leaf = params.get("leaf") || state.leaf || data.leaf;
    load(leaf, params.get("view") === "model" ? "model" : "raw", hash, false);
  } else {
    // The window the page came with answers the default filter on the shown branch.
    tv.key = treeKey();
    accept(data, tv.key);
    if (data.found >= 0) scrollToPos(data.found);
    render(true);
    if (hash) refreshTree(hash);
    if (hash && !document.getElementById(hash)) load(state.leaf, state.view, hash, false);
    else showTarget(hash);
  }
  history.replaceState({ leaf: state.leaf, view: state.view, target: hash }, "", location.href);
  // Measured by benchmarks/bench_viewer.py: the page is usable (tree drawn, conversation shown).
  if (window.performance && performance.mark) performance.mark("sessiontree-ready");

  // ------------------------------------------------------------------ live updates (server only)

  if (mode !== "server") return;
  var version = body.dataset.version;
  var liveEl = document.getElementById("live");
  var busy = false;
  function poll() {
    if (busy) return;
    busy = true;
    fetch("/s/" + encodeURIComponent(sessionId) + "/state.json" + token, { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (s) {
        liveEl.classList.remove("stale");
        if (s.version === version) return;
        var followed = state.leaf === data.leaf;   // showing the active branch: follow it
        var atBottom = convEl.scrollTop + convEl.clientHeight >= convEl.scrollHeight - 40;
        version = s.version;
        data.leaf = s.leaf;
        tv.key = "";  // every known row may have changed
        var leaf = followed ? s.leaf : state.leaf;
        return load(leaf, state.view, atBottom ? null : state.target, false).then(function () {
          if (!atBottom && state.target) showTarget(state.target);
        });
      })
      .catch(function () { liveEl.classList.add("stale"); })
      .then(function () { busy = false; });
  }
  setInterval(poll, 1000);
})();
