/* durq dashboard: the only script, and a small one (no build step, no dependencies).
   - pages marked data-refresh update their [data-live] sections in place;
   - forms and buttons with data-confirm ask before destructive actions;
   - a [data-select-all] checkbox selects every row of its table. */
"use strict";
(function () {
  var every = parseFloat(document.body.getAttribute("data-refresh") || "0");
  var busy = false;

  function refresh() {
    if (busy || document.hidden) return;
    // keep what the user is doing: no swap while a field of a live section has focus
    var focused = document.activeElement;
    if (focused && focused.closest && focused.closest("[data-live] form")) return;
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live][id]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh) el.replaceWith(document.importNode(fresh, true));
        });
      })
      .catch(function () { /* the next round tries again */ })
      .then(function () { busy = false; });
  }
  if (every > 0) window.setInterval(refresh, every * 1000);

  document.addEventListener("submit", function (ev) {
    var button = ev.submitter;
    var question = (button && button.getAttribute("data-confirm")) ||
      ev.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) ev.preventDefault();
  });

  document.addEventListener("change", function (ev) {
    var box = ev.target;
    if (!box.matches || !box.matches("[data-select-all]")) return;
    var table = box.closest("table");
    if (!table) return;
    table.querySelectorAll("tbody input[type=checkbox]").forEach(function (c) {
      c.checked = box.checked;
    });
  });
})();
