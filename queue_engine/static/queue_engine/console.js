/* jobsite console: theme, keyboard, relative times, row selection, live log, websocket visibility.
   Loaded in <head> without defer so the theme is set before the first paint. */
(function () {
  "use strict";

  var THEME_KEY = "jobsite-console-theme";
  var root = document.documentElement;

  // --- theme: "auto" follows the system; "light" and "dark" are stored ------------------
  function storedTheme() {
    try { return localStorage.getItem(THEME_KEY) || "auto"; } catch (e) { return "auto"; }
  }
  function applyTheme(theme) {
    if (theme === "light" || theme === "dark") root.setAttribute("data-theme", theme);
    else root.removeAttribute("data-theme");
    var label = { auto: "Auto", light: "Light", dark: "Dark" }[theme] || "Auto";
    document.querySelectorAll("[data-theme-toggle]").forEach(function (button) {
      var text = button.querySelector(".theme-label");
      if (text) text.textContent = label;
      button.title = theme === "auto" ? "Theme: follows the system (t)" : "Theme: " + label.toLowerCase() + " (t)";
    });
  }
  function cycleTheme() {
    var next = { auto: "light", light: "dark", dark: "auto" }[storedTheme()] || "auto";
    try {
      if (next === "auto") localStorage.removeItem(THEME_KEY);
      else localStorage.setItem(THEME_KEY, next);
    } catch (e) { /* private mode: the choice lasts for this page only */ }
    applyTheme(next);
  }
  applyTheme(storedTheme());

  // --- display settings: compact rows, absolute times (stored in this browser) ----------
  var VIEW_KEYS = { density: "jobsite-console-density", times: "jobsite-console-times" };
  var VIEW_ON = { density: "compact", times: "absolute" };
  function viewSetting(name) {
    try { return localStorage.getItem(VIEW_KEYS[name]) === VIEW_ON[name]; } catch (e) { return false; }
  }
  function applyView() {
    Object.keys(VIEW_KEYS).forEach(function (name) {
      var on = viewSetting(name);
      if (on) root.setAttribute("data-" + name, VIEW_ON[name]);
      else root.removeAttribute("data-" + name);
      document.querySelectorAll('[data-toggle-view="' + name + '"]').forEach(function (button) {
        button.setAttribute("aria-pressed", on ? "true" : "false");
      });
    });
  }
  function toggleView(name) {
    try {
      if (viewSetting(name)) localStorage.removeItem(VIEW_KEYS[name]);
      else localStorage.setItem(VIEW_KEYS[name], VIEW_ON[name]);
    } catch (e) { /* private mode: nothing is remembered */ }
    applyView();
    refreshTimes();
  }
  applyView();

  // --- relative times: server renders them, we keep them fresh ----------------------------
  function relative(date) {
    var seconds = (Date.now() - date.getTime()) / 1000;
    var ago = seconds >= 0;
    seconds = Math.abs(seconds);
    var text;
    if (seconds < 5) return ago ? "just now" : "in a moment";
    if (seconds < 60) text = Math.floor(seconds) + " s";
    else if (seconds < 3600) text = Math.floor(seconds / 60) + " min";
    else if (seconds < 86400) text = Math.floor(seconds / 3600) + " h";
    else text = Math.floor(seconds / 86400) + " d";
    return ago ? text + " ago" : "in " + text;
  }
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function absolute(date) {
    var today = new Date();
    var time = pad(date.getHours()) + ":" + pad(date.getMinutes()) + ":" + pad(date.getSeconds());
    if (date.toDateString() === today.toDateString()) return time;
    return date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate()) + " " + time;
  }
  // Relative ("3 min ago") with the exact time on hover, or, with "Absolute times" on, the
  // exact time (in this browser's time zone) with the relative one on hover.
  function refreshTimes(scope) {
    var exact = viewSetting("times");
    (scope || document).querySelectorAll("time.rel[datetime]").forEach(function (el) {
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date)) return;
      if (!el.dataset.serverTitle) el.dataset.serverTitle = el.title || "";
      el.textContent = exact ? absolute(date) : relative(date);
      el.title = exact ? relative(date) : el.dataset.serverTitle;
    });
  }

  // --- keyboard ---------------------------------------------------------------------------
  var pendingG = 0;
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }
  function focusSearch() {
    var field = document.querySelector("main [data-search]") || document.querySelector("[data-search]");
    if (field) { field.focus(); field.select(); }
  }
  function showShortcuts() {
    var dialog = document.getElementById("shortcuts-dialog");
    if (dialog && !dialog.open) dialog.showModal();
  }
  // j and k move through the rows of the page's tables by focusing each row's first link:
  // Enter then opens it, as any focused link, and the row shows it (tr:focus-within).
  // Live pages replace rows: the row is found again by its id.
  var currentRowId = "";
  function linkedRows() {
    return Array.from(document.querySelectorAll("main tbody tr")).filter(function (row) {
      return row.offsetParent !== null && row.querySelector("a[href]");
    });
  }
  function moveRow(step) {
    var rows = linkedRows();
    if (!rows.length) return;
    var active = document.activeElement && document.activeElement.closest("main tbody tr");
    var at = rows.indexOf(active);
    if (at < 0 && currentRowId) at = rows.findIndex(function (row) { return row.id === currentRowId; });
    var next = at < 0 ? (step > 0 ? 0 : rows.length - 1) : Math.min(Math.max(at + step, 0), rows.length - 1);
    var link = rows[next].querySelector("a[href]");
    currentRowId = rows[next].id;
    link.focus({ preventScroll: true });
    rows[next].scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", function (event) {
    if (event.metaKey || event.ctrlKey || event.altKey) return;
    if (event.key === "Escape" && typing(event.target)) { event.target.blur(); return; }
    if (typing(event.target)) return;
    if (pendingG && Date.now() - pendingG < 1200) {
      pendingG = 0;
      var link = document.querySelector('.nav a[data-key="' + event.key + '"]');
      if (link) { event.preventDefault(); link.click(); }
      return;
    }
    if (event.key === "/") { event.preventDefault(); focusSearch(); }
    else if (event.key === "j" || event.key === "k") { event.preventDefault(); moveRow(event.key === "j" ? 1 : -1); }
    else if (event.key === "?") { event.preventDefault(); showShortcuts(); }
    else if (event.key === "g") { pendingG = Date.now(); }
    else if (event.key === "t") { cycleTheme(); }
  });

  // --- row selection for bulk actions -------------------------------------------------------
  function updateSelection(form) {
    var boxes = form.querySelectorAll('input[name="ids"]');
    var checked = form.querySelectorAll('input[name="ids"]:checked');
    boxes.forEach(function (box) {
      var row = box.closest("tr");
      if (row) row.classList.toggle("selected", box.checked);
    });
    var all = form.querySelector("[data-select-all]");
    if (all) {
      all.checked = boxes.length > 0 && checked.length === boxes.length;
      all.indeterminate = checked.length > 0 && checked.length < boxes.length;
    }
    var count = form.querySelector("[data-selected-count]");
    if (count) {
      count.textContent = checked.length === 0 ? "Select jobs to act on them"
        : checked.length + (checked.length === 1 ? " job selected" : " jobs selected");
    }
    var matching = form.querySelector("[data-all-matching]");
    var everything = matching && matching.checked;
    if (everything && count) count.textContent = "Every job that matches this filter";
    form.querySelectorAll("[data-needs-selection]").forEach(function (button) {
      button.disabled = checked.length === 0 && !everything;
    });
  }
  document.addEventListener("change", function (event) {
    var form = event.target.closest && event.target.closest("form[data-bulk]");
    if (!form) return;
    if (event.target.hasAttribute("data-select-all")) {
      form.querySelectorAll('input[name="ids"]').forEach(function (box) { box.checked = event.target.checked; });
    }
    updateSelection(form);
  });

  // --- live log: follow the tail only while the reader is at the bottom ---------------------
  function watchLog(log) {
    if (log.dataset.watched) return;
    log.dataset.watched = "1";
    var atBottom = true;
    log.scrollTop = log.scrollHeight;
    log.addEventListener("scroll", function () {
      atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 24;
    });
    new MutationObserver(function () {
      if (atBottom) log.scrollTop = log.scrollHeight;
    }).observe(log, { childList: true, subtree: true });
  }
  document.addEventListener("click", function (event) {
    var copy = event.target.closest && event.target.closest("[data-copy-log]");
    if (copy) {
      var log = document.getElementById(copy.getAttribute("data-copy-log"));
      if (!log || !navigator.clipboard) return;
      var text = Array.from(log.querySelectorAll(".log-line .text")).map(function (el) {
        return el.textContent;
      }).join("\n");
      navigator.clipboard.writeText(text).then(function () {
        var label = copy.textContent;
        copy.textContent = "Copied";
        setTimeout(function () { copy.textContent = label; }, 1200);
      });
      return;
    }
    var viewToggle = event.target.closest && event.target.closest("[data-toggle-view]");
    if (viewToggle) toggleView(viewToggle.getAttribute("data-toggle-view"));
    if (event.target.closest && event.target.closest("[data-theme-toggle]")) cycleTheme();
    if (event.target.closest && event.target.closest("[data-shortcuts]")) showShortcuts();
  });

  // --- find in the log: highlight every match in the lines shown, step through them ------
  // Matches are wrapped in <mark> by splitting text nodes (never through HTML), so the
  // log's text stays as the server escaped it, and Copy still copies the plain lines.
  var find = { query: "", hits: [], current: -1 };
  function findBox() { return document.querySelector("[data-log-find]"); }
  function clearMarks(scope) {
    scope.querySelectorAll("mark.find-hit").forEach(function (mark) {
      var parent = mark.parentNode;
      parent.replaceChild(document.createTextNode(mark.textContent), mark);
      parent.normalize();
    });
  }
  function markMatches(textEl, needle) {
    var text = textEl.textContent;
    var lower = text.toLowerCase();
    var at = lower.indexOf(needle);
    if (at < 0) return [];
    var found = [];
    var fragment = document.createDocumentFragment();
    var from = 0;
    while (at >= 0) {
      fragment.appendChild(document.createTextNode(text.slice(from, at)));
      var mark = document.createElement("mark");
      mark.className = "find-hit";
      mark.textContent = text.slice(at, at + needle.length);
      fragment.appendChild(mark);
      found.push(mark);
      from = at + needle.length;
      at = lower.indexOf(needle, from);
    }
    fragment.appendChild(document.createTextNode(text.slice(from)));
    textEl.textContent = "";
    textEl.appendChild(fragment);
    return found;
  }
  function runFind(keepPlace) {
    var box = findBox();
    if (!box) return;
    var lines = document.getElementById(box.getAttribute("data-log-find"));
    if (!lines) return;
    clearMarks(lines);
    find.hits = [];
    if (find.query) {
      lines.querySelectorAll(".log-line .text").forEach(function (el) {
        find.hits = find.hits.concat(markMatches(el, find.query));
      });
    }
    find.current = find.hits.length ? (keepPlace ? Math.min(Math.max(find.current, 0), find.hits.length - 1) : 0) : -1;
    showCurrent(!keepPlace);
  }
  function showCurrent(scroll) {
    var box = findBox();
    find.hits.forEach(function (hit, i) { hit.classList.toggle("current", i === find.current); });
    var count = box && box.querySelector("[data-log-count]");
    if (count) {
      count.textContent = !find.query ? "" : find.hits.length === 0 ? "no match"
        : (find.current + 1) + " of " + find.hits.length;
      count.classList.toggle("none", Boolean(find.query) && find.hits.length === 0);
    }
    var hit = find.hits[find.current];
    if (hit && scroll) hit.scrollIntoView({ block: "nearest" });
  }
  function stepFind(step) {
    if (!find.hits.length) return;
    find.current = (find.current + step + find.hits.length) % find.hits.length;
    showCurrent(true);
  }
  document.addEventListener("input", function (event) {
    if (!event.target.hasAttribute || !event.target.hasAttribute("data-log-query")) return;
    find.query = event.target.value.toLowerCase();
    runFind(false);
  });
  document.addEventListener("keydown", function (event) {
    if (!event.target.hasAttribute || !event.target.hasAttribute("data-log-query")) return;
    if (event.key === "Enter") { event.preventDefault(); stepFind(event.shiftKey ? -1 : 1); }
  });
  document.addEventListener("click", function (event) {
    var step = event.target.closest && event.target.closest("[data-log-step]");
    if (step) stepFind(Number(step.getAttribute("data-log-step")));
  });
  // New lines arrive live: find in them too, staying on the current match.
  document.addEventListener("htmx:wsAfterMessage", function () { if (find.query) runFind(true); });

  // A link to a line (#L123): mark it and bring it into view inside the log. A class, not
  // :target alone: the socket's first push replaces the lines, and :target stays with the
  // element the page loaded with.
  function markLinkedLine() {
    var target = location.hash && document.getElementById(location.hash.slice(1));
    if (!target || !target.classList.contains("log-line")) return null;
    target.classList.add("linked");
    return target;
  }
  function showLinkedLine() {
    var target = markLinkedLine();
    if (target) target.scrollIntoView({ block: "center" });
  }
  document.addEventListener("htmx:wsAfterMessage", markLinkedLine);

  // --- websockets: mark live, pause while the tab is hidden -------------------------------
  var sockets = [];
  document.addEventListener("htmx:wsOpen", function (event) {
    var wrapper = event.detail.socketWrapper;
    if (sockets.indexOf(wrapper) < 0) sockets.push(wrapper);
    if (document.hidden) wrapper.send(JSON.stringify({ visible: false }));
    document.querySelectorAll("[data-live]").forEach(function (el) { el.classList.add("on"); el.title = "Live"; });
  });
  // The server closes with these codes when the user may no longer see the console; htmx does
  // not reconnect on them. Reloading lets the server decide: the sign-in page (with ?next=) for
  // 4401, the page naming the missing role for 4403.
  var ACCESS_LOST = {
    4401: "You were signed out, so this page stopped updating. Taking you to the sign-in page\u2026",
    4403: "Your console role was removed, so this page stopped updating. Reloading\u2026"
  };
  var RELOAD_AFTER_MS = 3000;
  document.addEventListener("htmx:wsClose", function (event) {
    var closed = event.detail && event.detail.event;
    var lost = closed ? ACCESS_LOST[closed.code] : undefined;
    document.querySelectorAll("[data-live]").forEach(function (el) {
      el.classList.remove("on");
      el.title = lost ? "Disconnected" : "Reconnecting";
      if (lost && el.textContent) el.textContent = "Disconnected";
    });
    if (lost) accessLost(lost);
  });
  function accessLost(text) {
    if (document.querySelector("[data-access-lost]")) return;
    var note = document.createElement("p");
    note.className = "flash flash-error";
    note.setAttribute("role", "alert");
    note.setAttribute("data-access-lost", "");
    note.textContent = text + " ";
    var now = document.createElement("a");
    now.href = location.href;
    now.textContent = "Go now";
    note.appendChild(now);
    var main = document.getElementById("main") || document.body;
    main.insertBefore(note, main.firstChild);
    // assign, not reload: a GET even if the page came from a form.
    setTimeout(function () { location.assign(location.href); }, RELOAD_AFTER_MS);
  }
  document.addEventListener("visibilitychange", function () {
    var message = JSON.stringify({ visible: !document.hidden });
    sockets.forEach(function (wrapper) {
      try { wrapper.send(message); } catch (e) { /* closed: it catches up when it reconnects */ }
    });
  });
  document.addEventListener("htmx:wsAfterMessage", function () { refreshTimes(); });
  // --- polling, where the site serves no websocket: the page fetches itself every few
  // seconds and swaps in its changing parts (hx-select-oob), only while it is visible, and
  // not on a jobs list with rows selected (the swap would clear the selection).
  document.addEventListener("htmx:configRequest", function (event) {
    var el = event.detail.elt;
    if (!el.hasAttribute || !el.hasAttribute("data-poll")) return;
    var selecting = el.hasAttribute("data-live-jobs") &&
      document.querySelector('#job-results input[type="checkbox"]:checked');
    if (document.hidden || selecting) { event.preventDefault(); return; }
    event.detail.path = location.pathname + location.search;
  });
  function markPolling(root) {
    if (!root.querySelector || !document.querySelector("[data-poll]")) return;
    document.querySelectorAll("[data-live]").forEach(function (el) {
      el.classList.add("on", "polling");
      el.title = "This site serves no websocket for live updates: the page refreshes itself every 5 s";
      if (el.textContent) el.textContent = "Every 5 s";
    });
  }
  document.addEventListener("DOMContentLoaded", function () { markPolling(document); });
  document.addEventListener("htmx:afterSettle", function () { refreshTimes(); });

  // --- jobs list, live: tell its socket which rows are on screen; keep selections across swaps --
  var jobsSocket = null;
  var reportedResults = null;
  function reportRows() {
    var results = document.getElementById("job-results");
    reportedResults = results;
    if (!jobsSocket || !results) return;
    var rows = Array.from(results.querySelectorAll('tr[id^="job-row-"]')).map(function (row) {
      return [Number(row.id.slice("job-row-".length)), row.getAttribute("data-version") || ""];
    });
    try {
      jobsSocket.send(JSON.stringify({ rows: rows, query: results.getAttribute("data-query") || "" }));
    } catch (e) { /* closed: the rows are reported again on reconnect */ }
  }
  document.addEventListener("htmx:wsOpen", function (event) {
    if (!event.target.hasAttribute || !event.target.hasAttribute("data-live-jobs")) return;
    jobsSocket = event.detail.socketWrapper;
    reportRows();
  });
  document.addEventListener("htmx:afterSettle", function () {
    // A filter or page change swapped the results in: the socket must watch the new rows.
    if (jobsSocket && document.getElementById("job-results") !== reportedResults) reportRows();
  });
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var old = event.detail.target;
    if (!old || !old.id || old.id.indexOf("job-row-") !== 0) return;
    var box = old.querySelector('input[name="ids"]');
    var fresh = event.detail.fragment.querySelector('input[name="ids"]');
    if (!box || !fresh) return;
    fresh.checked = box.checked;
    if (document.activeElement === box) setTimeout(function () { fresh.focus(); }, 0);
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    document.querySelectorAll("form[data-bulk]").forEach(updateSelection);
  });

  // --- list pages, live: tell the socket which filter the page shows ----------------------
  var pageSockets = [];
  function reportQuery(wrapper) {
    var query = location.search.slice(1);
    if (wrapper.reportedQuery === query) return;
    wrapper.reportedQuery = query;
    try { wrapper.send(JSON.stringify({ query: query })); } catch (e) { /* reported on reconnect */ }
  }
  document.addEventListener("htmx:wsOpen", function (event) {
    if (!event.target.hasAttribute || !event.target.hasAttribute("data-live-page")) return;
    var wrapper = event.detail.socketWrapper;
    wrapper.reportedQuery = null;  // a new connection knows nothing yet
    if (pageSockets.indexOf(wrapper) < 0) pageSockets.push(wrapper);
    reportQuery(wrapper);
  });
  // A filter swapped the results in and pushed its URL: the socket must follow the new filter.
  ["htmx:pushedIntoHistory", "htmx:historyRestore"].forEach(function (name) {
    document.addEventListener(name, function () { pageSockets.forEach(reportQuery); });
  });

  function init(scope) {
    refreshTimes(scope);
    document.querySelectorAll("form[data-bulk]").forEach(updateSelection);
    document.querySelectorAll("[data-follow]").forEach(watchLog);
    applyTheme(storedTheme());
    applyView();
  }
  document.addEventListener("DOMContentLoaded", function () {
    init(document);
    showLinkedLine();
    setInterval(refreshTimes, 10000);
  });
  document.addEventListener("htmx:afterSettle", function () { init(document); });
})();
