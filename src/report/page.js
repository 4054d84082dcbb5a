// The report page's script: renders the cluster browser, the review sample and an eval run's
// missed pairs from the JSON data embedded in the page (#neardup-data). Every value from the
// corpus goes into the page as a text node (textContent), never as markup.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("neardup-data").textContent);
  var COLLAPSE_CHARS = 700;
  var COLLAPSE_LINES = 12;

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function fmt(n) {
    return Number(n).toLocaleString("en-US");
  }
  function lines(text) {
    return text ? text.split("\n").length : 0;
  }

  // A block that shows its first lines until "show all" is pressed.
  function collapsible(content, long) {
    var box = el("div", "collapsible");
    box.appendChild(content);
    if (!long) return box;
    box.classList.add("collapsed");
    var button = el("button", "toggle", "show all");
    button.type = "button";
    button.addEventListener("click", function () {
      var collapsed = box.classList.toggle("collapsed");
      button.textContent = collapsed ? "show all" : "collapse";
    });
    var wrap = el("div");
    wrap.appendChild(box);
    wrap.appendChild(button);
    return wrap;
  }
  function isLong(text) {
    return !!text && (text.length > COLLAPSE_CHARS || lines(text) > COLLAPSE_LINES);
  }

  function docHeader(role, doc) {
    var head = el("div", "doc-head");
    head.appendChild(el("span", "role", role));
    head.appendChild(el("span", "doc-id", doc.id));
    var where = doc.loc ? doc.loc + ", " : "";
    head.appendChild(el("span", "loc", where + fmt(doc.bytes) + " bytes"));
    return head;
  }
  function cutNote(doc) {
    return doc.cut ? el("div", "cut", "cut: the first part of " + fmt(doc.bytes) + " bytes") : null;
  }
  function plainText(doc) {
    if (doc.text === null || doc.text === undefined) {
      return el("div", "unavailable", "text unavailable (see the notes above)");
    }
    var box = el("div");
    box.appendChild(collapsible(el("pre", "text", doc.text), isLong(doc.text)));
    var note = cutNote(doc);
    if (note) box.appendChild(note);
    return box;
  }

  // One side of a diff: equal spans plus this side's own spans, highlighted.
  function diffSide(spans, own) {
    var pre = el("pre", "text");
    for (var i = 0; i < spans.length; i++) {
      var kind = spans[i][0];
      if (kind === "=") {
        pre.appendChild(document.createTextNode(spans[i][1]));
      } else if (kind === own) {
        pre.appendChild(el(own === "-" ? "del" : "ins", null, spans[i][1]));
      }
    }
    return pre;
  }
  function sideText(spans, own) {
    var text = "";
    for (var i = 0; i < spans.length; i++) {
      if (spans[i][0] === "=" || spans[i][0] === own) text += spans[i][1];
    }
    return text;
  }

  // Side by side: the base document (deletions marked) and the other one (insertions marked).
  function diffView(baseRole, base, otherRole, other, item) {
    var grid = el("div", "diff");
    var left = el("div", "side");
    var right = el("div", "side");
    left.appendChild(docHeader(baseRole, base));
    right.appendChild(docHeader(otherRole, other));
    if (item.diff) {
      var long = isLong(sideText(item.diff, "-")) || isLong(sideText(item.diff, "+"));
      var pair = el("div", "diff-pair");
      var l = el("div", "side-text");
      var r = el("div", "side-text");
      l.appendChild(diffSide(item.diff, "-"));
      r.appendChild(diffSide(item.diff, "+"));
      pair.appendChild(l);
      pair.appendChild(r);
      grid.appendChild(left);
      grid.appendChild(right);
      var box = el("div", "diff-box");
      box.appendChild(grid);
      box.appendChild(collapsible(pair, long));
      var notes = el("div", "cut");
      var cuts = [];
      if (base.cut) cuts.push("left cut to its first part (" + fmt(base.bytes) + " bytes in all)");
      if (other.cut) cuts.push("right cut to its first part (" + fmt(other.bytes) + " bytes in all)");
      if (item.diff_partial) cuts.push("too different for a word diff: shown as replaced whole");
      if (cuts.length) {
        notes.textContent = cuts.join("; ");
        box.appendChild(notes);
      }
      return box;
    }
    left.appendChild(plainText(base));
    right.appendChild(plainText(other));
    grid.appendChild(left);
    grid.appendChild(right);
    return grid;
  }

  function badge(text, kind) {
    return el("span", "badge " + kind, text);
  }
  function memberFacts(member, keptId) {
    var facts = el("div", "facts");
    facts.appendChild(badge(member.reason.replace(/_/g, " "), member.reason));
    if (member.reason === "chained") {
      facts.appendChild(badge("chained via " + member.via, "chain"));
    }
    if (member.similarity !== undefined) {
      facts.appendChild(el("span", "fact", "similarity " + member.similarity.toFixed(3) +
          (member.via !== keptId ? " to " + member.via : "")));
    }
    facts.appendChild(el("span", "fact", "distance " + member.distance + " to kept" +
        (member.via !== keptId ? ", " + member.distance_to_via + " to via" : "")));
    return facts;
  }

  // A removed member against the document it was matched to.
  function memberView(member, kept, via) {
    var box = el("div", "member" + (member.reason === "chained" ? " chained" : ""));
    box.setAttribute("data-id", member.doc.id);
    var title = el("div", "member-title");
    title.appendChild(el("span", "role", "removed"));
    title.appendChild(el("span", "doc-id", member.doc.id));
    title.appendChild(el("span", "loc", member.doc.loc || ""));
    box.appendChild(title);
    box.appendChild(memberFacts(member, kept.id));
    if (member.reason === "exact_duplicate") {
      box.appendChild(el("div", "same", "byte-identical to the kept document"));
    } else if (member.diff !== null || member.doc.text !== null) {
      var base = via || kept;
      box.appendChild(diffView(base === kept ? "kept" : "via", base, "removed", member.doc,
          member));
    }
    return box;
  }

  // ---- the cluster browser ----------------------------------------------------------------------
  var clusters = data.clusters;
  var state = { page: 0, size: 20, query: "", filter: "all" };

  function matches(cluster) {
    var members = cluster.members;
    if (state.filter !== "all") {
      var near = false, chained = false;
      for (var i = 0; i < members.length; i++) {
        if (members[i].reason === "chained") chained = true;
        else if (members[i].reason !== "exact_duplicate") near = true;  // near, contained, ...
      }
      if (state.filter === "near" && !near) return false;
      if (state.filter === "chained" && !chained) return false;
      if (state.filter === "exact" && (near || chained)) return false;
    }
    var q = state.query;
    if (!q) return true;
    if (q.charAt(0) === "#") return String(cluster.n) === q.slice(1);
    if (cluster.kept.id.indexOf(q) >= 0) return true;
    for (var j = 0; j < members.length; j++) {
      if (members[j].doc.id.indexOf(q) >= 0) return true;
    }
    return false;
  }

  function clusterView(cluster) {
    var card = el("article", "cluster");
    card.setAttribute("data-cluster", String(cluster.n));
    var head = el("h3", null, "Cluster " + cluster.n + ": " + fmt(cluster.size) + " documents");
    card.appendChild(head);
    var byId = {};
    for (var i = 0; i < cluster.members.length; i++) byId[cluster.members[i].doc.id] = cluster.members[i].doc;
    for (var v = 0; v < cluster.vias.length; v++) byId[cluster.vias[v].id] = cluster.vias[v];
    var kept = el("div", "kept");
    kept.appendChild(docHeader("kept", cluster.kept));
    if (cluster.texts_omitted) {
      kept.appendChild(el("div", "unavailable", "texts omitted: the page's text budget was reached"));
    } else {
      kept.appendChild(plainText(cluster.kept));
    }
    card.appendChild(kept);
    for (var m = 0; m < cluster.members.length; m++) {
      var member = cluster.members[m];
      var via = member.via !== cluster.kept.id ? byId[member.via] : null;
      if (via === undefined) via = { id: member.via, loc: "", bytes: 0, text: null };
      if (member.diff === null && member.doc.text === null) {
        var row = el("div", "member compact" + (member.reason === "chained" ? " chained" : ""));
        row.setAttribute("data-id", member.doc.id);
        var title = el("div", "member-title");
        title.appendChild(el("span", "role", "removed"));
        title.appendChild(el("span", "doc-id", member.doc.id));
        title.appendChild(el("span", "loc", member.doc.loc || ""));
        row.appendChild(title);
        row.appendChild(memberFacts(member, cluster.kept.id));
        card.appendChild(row);
      } else {
        card.appendChild(memberView(member, cluster.kept, via));
      }
    }
    if (cluster.unlisted > 0) {
      card.appendChild(el("p", "note", "... and " + fmt(cluster.unlisted) +
          " more removed members (all in clusters.jsonl)"));
    }
    return card;
  }

  var list = document.getElementById("cluster-list");
  var info = document.getElementById("page-info");
  var found = document.getElementById("cluster-matches");
  var prev = document.getElementById("page-prev");
  var next = document.getElementById("page-next");

  function renderClusters() {
    var shown = clusters.filter(matches);
    var size = state.size > 0 ? state.size : Math.max(shown.length, 1);
    var pages = Math.max(1, Math.ceil(shown.length / size));
    if (state.page >= pages) state.page = pages - 1;
    list.textContent = "";
    var start = state.page * size;
    for (var i = start; i < Math.min(shown.length, start + size); i++) {
      list.appendChild(clusterView(shown[i]));
    }
    if (shown.length === 0) list.appendChild(el("p", "note", "No cluster on this page matches."));
    info.textContent = "page " + (state.page + 1) + " of " + pages;
    found.textContent = (shown.length === clusters.length ? fmt(shown.length) + " clusters"
        : fmt(shown.length) + " of " + fmt(clusters.length) + " clusters match") +
        (data.total_clusters > clusters.length ? " (of " + fmt(data.total_clusters) + " in the run)" : "");
    prev.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
  }

  var pageSize = el("select");
  pageSize.id = "page-size";
  [["10", 10], ["20", 20], ["50", 50], ["all", 0]].forEach(function (option) {
    var o = el("option", null, option[0] + " a page");
    o.value = String(option[1]);
    if (option[1] === state.size) o.selected = true;
    pageSize.appendChild(o);
  });
  document.querySelector("#clusters .pager").appendChild(pageSize);
  pageSize.addEventListener("change", function () {
    state.size = Number(pageSize.value);
    state.page = 0;
    renderClusters();
  });
  prev.addEventListener("click", function () {
    state.page = Math.max(0, state.page - 1);
    renderClusters();
  });
  next.addEventListener("click", function () {
    state.page += 1;
    renderClusters();
  });
  document.getElementById("cluster-search").addEventListener("input", function (event) {
    state.query = event.target.value.trim();
    state.page = 0;
    renderClusters();
  });
  document.getElementById("cluster-filter").addEventListener("change", function (event) {
    state.filter = event.target.value;
    state.page = 0;
    renderClusters();
  });
  renderClusters();

  // ---- the review sample ------------------------------------------------------------------------
  var tally = document.getElementById("sample-tally");
  var verdicts = {};
  function updateTally() {
    var yes = 0, no = 0;
    for (var key in verdicts) {
      if (verdicts[key] === "yes") yes++;
      else if (verdicts[key] === "no") no++;
    }
    var judged = yes + no;
    tally.textContent = judged === 0
        ? "Marked: none yet."
        : "Marked " + judged + " of " + data.sample.length + ": " + yes + " true duplicates, " + no +
            " not; estimated precision " + (yes / judged).toFixed(2) + ".";
  }
  var sampleList = document.getElementById("sample-list");
  data.sample.forEach(function (entry, index) {
    var card = el("article", "sample-entry");
    card.appendChild(el("h3", null, (index + 1) + ". from cluster " + entry.cluster + " (" +
        fmt(entry.size) + " documents), kept: " + entry.kept.id));
    card.appendChild(memberView(entry.member, entry.kept, entry.via || null));
    if (entry.member.reason === "exact_duplicate") card.appendChild(plainText(entry.kept));
    var vote = el("div", "vote");
    [["yes", "a true duplicate"], ["no", "not a duplicate"]].forEach(function (choice) {
      var label = el("label");
      var input = el("input");
      input.type = "radio";
      input.name = "sample-" + index;
      input.value = choice[0];
      input.addEventListener("change", function () {
        verdicts[index] = choice[0];
        updateTally();
      });
      label.appendChild(input);
      label.appendChild(document.createTextNode(" " + choice[1]));
      vote.appendChild(label);
    });
    card.appendChild(vote);
    sampleList.appendChild(card);
  });
  if (data.sample.length === 0) sampleList.appendChild(el("p", "note", "No document was removed."));
  updateTally();

  // ---- an eval run's missed pairs ---------------------------------------------------------------
  var missedList = document.getElementById("missed-list");
  if (missedList) {
    data.missed.forEach(function (pair) {
      var card = el("article", "missed " + pair.kind);
      card.appendChild(el("h3", null, (pair.kind === "missed" ? "missed: " : "false positive: ") +
          pair.label + " (" + pair.set + ")"));
      var facts = el("div", "facts");
      if (pair.reference !== undefined) facts.appendChild(el("span", "fact", "labelled similarity " + pair.reference));
      if (pair.jaccard !== undefined) facts.appendChild(el("span", "fact", "shingle Jaccard " + pair.jaccard.toFixed(3)));
      if (pair.distance !== undefined) facts.appendChild(el("span", "fact", "fingerprint distance " + pair.distance));
      card.appendChild(facts);
      card.appendChild(diffView("a", pair.a, "b", pair.b, pair));
      missedList.appendChild(card);
    });
    if (data.missed.length === 0) missedList.appendChild(el("p", "note", "None."));
  }
})();
