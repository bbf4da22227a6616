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

  var data = JSON.parse(document.getElementById("tree-data").textContent);
  var rows = data.rows, index = {}, folded = {}, visible = [], selectedPath = {};
  var state = { leaf: null, view: "raw", target: null };
  var head = convEl.querySelector(".conv-head");
  state.leaf = head ? head.dataset.leaf || null : data.leaf;
  state.view = head ? head.dataset.view : "raw";

  function reindex() {
    index = {};
    for (var i = 0; i < rows.length; i++) index[rows[i][ID]] = i;
  }

  function computePath() {
    selectedPath = {};
    var i = index[state.leaf];
    var guard = 0;
    while (i !== undefined && i >= 0 && guard++ <= rows.length) { selectedPath[i] = true; i = rows[i][PARENT]; }
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

  // Visible rows: filter, then folds (a folded row hides rows i+1..END). Linear.
  function computeVisible() {
    var filter = filterEl.value;
    visible = [];
    for (var i = 0; i < rows.length; i++) {
      var row = rows[i];
      if (keep(row, filter) || (row[FLAGS] & F_LEAF)) visible.push(i);
      if (folded[i]) i = row[END];
    }
    innerEl.style.height = (visible.length * ROW_H) + "px";
    countEl.textContent = visible.length + " of " + rows.length + " entries";
  }

  function foldable(row) {
    return row[END] > index[row[ID]] && (row[FLAGS] & (F_BRANCH_POINT | F_BRANCH_START)) !== 0;
  }

  function drawRow(i, top) {
    var row = rows[i], f = row[FLAGS];
    var el = document.createElement("div");
    el.className = "row" + (f & F_ACTIVE ? " on-path" : "") + (f & F_LEAF ? " leaf" : "") +
      (selectedPath[i] ? " selected-path" : "") + (row[ID] === state.target ? " current" : "") +
      (f & F_RETIRED ? " retired" : "") + (f & F_COMPACTION ? " compaction" : "") +
      (f & F_BRANCH_SUMMARY ? " branch_summary" : "");
    el.style.top = top + "px";
    el.style.paddingLeft = (4 + row[DEPTH] * INDENT) + "px";
    el.dataset.row = i;
    var fold = document.createElement("span");
    fold.className = "fold";
    if (foldable(row)) { fold.textContent = folded[i] ? "▸" : "▾"; fold.dataset.fold = i; }
    el.appendChild(fold);
    var id = document.createElement("span"); id.className = "id"; id.textContent = row[ID] + " ";
    var kind = document.createElement("span"); kind.className = "kind " + row[KIND];
    kind.textContent = (f & F_RETIRED ? "retired " : "") + row[KIND];
    el.appendChild(id); el.appendChild(kind);
    if (row[LABEL] !== null) { var lab = document.createElement("span"); lab.className = "lab"; lab.textContent = row[LABEL]; el.appendChild(lab); }
    if (f & F_BRANCH_POINT) {
      var bp = document.createElement("span"); bp.className = "bp";
      var n = 0; for (var j = i + 1; j <= row[END]; j = rows[j][END] + 1) n++;
      bp.textContent = n + " branches"; el.appendChild(bp);
    }
    el.appendChild(document.createTextNode(" " + (row[SUMMARY] === null ? "" : row[SUMMARY])));
    if (row[SUMMARY] === null) wantSummary(i);
    el.title = row[ID] + (f & F_LEAF ? " (active leaf)" : "");
    return el;
  }

  // Large sessions come without summaries: ask for those of the rows drawn.
  var wanted = {}, asked = {}, summaryTimer = null;
  function wantSummary(i) {
    if (mode !== "server" || asked[i]) return;
    wanted[i] = true;
    if (!summaryTimer) summaryTimer = setTimeout(fetchSummaries, 30);
  }
  function fetchSummaries() {
    summaryTimer = null;
    var list = Object.keys(wanted).slice(0, 500);
    wanted = {};
    list.forEach(function (i) { asked[i] = true; });
    if (!list.length) return;
    fetch("/s/" + encodeURIComponent(sessionId) + "/summaries.json?rows=" + list.join(","), { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (d) {
        Object.keys(d.summaries || {}).forEach(function (k) { if (rows[+k]) rows[+k][SUMMARY] = d.summaries[k]; });
        render(true);
      }).catch(function () {});
  }

  var drawn = "";
  function render(force) {
    var first = Math.max(0, Math.floor(treeEl.scrollTop / ROW_H) - OVERSCAN);
    var last = Math.min(visible.length, Math.ceil((treeEl.scrollTop + treeEl.clientHeight) / ROW_H) + OVERSCAN);
    var key = first + ":" + last;
    if (!force && key === drawn) return;
    drawn = key;
    var frag = document.createDocumentFragment();
    for (var k = first; k < last; k++) frag.appendChild(drawRow(visible[k], k * ROW_H));
    innerEl.replaceChildren(frag);
  }

  function refreshTree(scrollTo) {
    computePath(); computeVisible(); render(true);
    if (scrollTo !== undefined) {
      var pos = visible.indexOf(index[scrollTo]);
      if (pos >= 0) {
        var y = pos * ROW_H;
        if (y < treeEl.scrollTop || y > treeEl.scrollTop + treeEl.clientHeight - ROW_H)
          treeEl.scrollTop = Math.max(0, y - treeEl.clientHeight / 2);
        render(true);
      }
    }
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
    if (!rowEl) return;
    var row = rows[+rowEl.dataset.row];
    load(rows[row[TIP]][ID], state.view, row[ID], true);
  });
  filterEl.addEventListener("change", function () { refreshTree(state.target || state.leaf); });
  document.getElementById("tree-unfold").addEventListener("click", function () { folded = {}; refreshTree(); });
  document.getElementById("view-raw").addEventListener("change", function () { load(state.leaf, "raw", state.target, true); });
  document.getElementById("view-model").addEventListener("change", function () { load(state.leaf, "model", state.target, true); });
  if (branchEl) branchEl.addEventListener("change", function () { load(branchEl.value, state.view, null, true); });
  window.addEventListener("popstate", function (ev) {
    var s = ev.state || {};
    load(s.leaf || data.leaf, s.view || "raw", s.target || null, false);
  });
  convEl.addEventListener("click", function (ev) {
    var more = ev.target.closest("button.earlier");
    if (more && mode === "server") {
      var q = "/s/" + encodeURIComponent(sessionId) + "/conversation" + url(state.leaf, state.view, null) +
        "&start=" + encodeURIComponent(more.dataset.start);
      fetch(q, { credentials: "same-origin" }).then(function (r) {
        // Only our template output goes into the page: never an error body (plain text
        // that may quote the session, e.g. "Cannot show this session: ...").
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      }).then(function (html) {
        var tmp = document.createElement("div");
        tmp.innerHTML = html;  // escaped template output
        var oldHead = tmp.querySelector(".conv-head"); if (oldHead) oldHead.remove();
        var height = convEl.scrollHeight;
        more.replaceWith.apply(more, Array.prototype.slice.call(tmp.childNodes));
        convEl.scrollTop += convEl.scrollHeight - height;
      }).catch(function () {});
      return;
    }
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
    var leaf = params.get("leaf") || state.leaf || data.leaf;
    load(leaf, params.get("view") === "model" ? "model" : "raw", hash, false);
  } else {
    refreshTree(hash || state.leaf);
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
        return fetch("/s/" + encodeURIComponent(sessionId) + "/tree.json" + token, { credentials: "same-origin" })
          .then(function (r) { return r.json(); })
          .then(function (d) {
            data = d; rows = d.rows; asked = {}; reindex();
            var leaf = followed ? d.leaf : state.leaf;
            return load(leaf, state.view, atBottom ? null : state.target, false).then(function () {
              if (!atBottom && state.target) showTarget(state.target);
            });
          });
      })
      .catch(function () { liveEl.classList.add("stale"); })
      .then(function () { busy = false; });
  }
  setInterval(poll, 1000);
})();
