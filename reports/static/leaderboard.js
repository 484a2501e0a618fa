// Sortable tables, the privacy-notion filter and the ranking's picker of the leaderboard site.
// A classic script with no imports and no requests, so it runs from file:// as well as
// from a static host. Without it every table is still complete, in the builder's order.
(function () {
  "use strict";

  // A cell sorts by its data-sort attribute when it has one (numbers, "Infinity", or ""
  // for no value), else by its text. Empty values go last in either direction.
  function sortKey(cell) {
    return cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort")
                                          : cell.textContent.trim();
  }

  function compare(a, b, numeric) {
    if (numeric) {
      return parseFloat(a) - parseFloat(b);
    }
    return a.localeCompare(b, undefined, { numeric: true, sensitivity: "base" });
  }

  function sortTable(table, header) {
    var column = header.cellIndex;
    var numeric = header.getAttribute("data-type") === "number";
    var direction = header.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.removeAttribute("aria-sort");
    });
    header.setAttribute("aria-sort", direction === 1 ? "ascending" : "descending");
    var body = table.tBodies[0];
    var lines = Array.prototype.slice.call(body.rows);
    lines.sort(function (x, y) {
      var a = sortKey(x.cells[column]);
      var b = sortKey(y.cells[column]);
      if (a === "" || b === "") {
        return (a === "") - (b === "");
      }
      return direction * compare(a, b, numeric);
    });
    lines.forEach(function (line) { body.appendChild(line); });
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header) {
      header.tabIndex = 0;
      header.title = header.title || "sort by this column (again: reverse)";
      header.addEventListener("click", function () { sortTable(table, header); });
      header.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          sortTable(table, header);
        }
      });
    });
  });

  // The ranking shows one dataset and one privacy family at a time, picked with two rows
  // of tabs; a dataset lacking the picked family shows its first one. The picked tabs
  // are kept in the address (#fashion-mnist/full-dp), so a link opens on them; the
  // address of a dataset's section (#rank-mnist) opens on that dataset. The lines past
  // the first few of a ranking fold under a button. Without the script, everything shows.
  var picker = document.getElementById("ranking-picker");
  var panels = document.querySelectorAll("section.dataset-ranking");
  if (picker && panels.length) {
    var datasetTabs = picker.querySelectorAll("button[data-dataset]");
    var familyTabs = picker.querySelectorAll("button[data-family]");
    var state = { dataset: panels[0].getAttribute("data-dataset"), family: "" };
    var panelOf = function (dataset) {
      return Array.prototype.filter.call(panels, function (panel) {
        return panel.getAttribute("data-dataset") === dataset;
      })[0];
    };
    var read = function () {
      var wanted = decodeURIComponent(window.location.hash.slice(1));
      var parts = wanted.replace(/^rank-/, "").split("/");
      if (panelOf(parts[0])) {
        state.dataset = parts[0];
        state.family = parts[1] || state.family;
        return true;
      }
      return false;
    };
    var show = function (keep) {
      var panel = panelOf(state.dataset);
      var families = panel.getAttribute("data-families").split(" ");
      if (families.indexOf(state.family) < 0) {
        state.family = families[0];
      }
      Array.prototype.forEach.call(panels, function (other) {
        other.hidden = other !== panel;
      });
      Array.prototype.forEach.call(panel.querySelectorAll("div.family-ranking"), function (div) {
        div.hidden = div.getAttribute("data-family") !== state.family;
      });
      Array.prototype.forEach.call(datasetTabs, function (tab) {
        tab.setAttribute("aria-selected", String(tab.getAttribute("data-dataset") === state.dataset));
      });
      Array.prototype.forEach.call(familyTabs, function (tab) {
        var family = tab.getAttribute("data-family");
        tab.disabled = families.indexOf(family) < 0;
        tab.setAttribute("aria-selected", String(family === state.family));
      });
      if (keep) {  // replaceState: no jump, and no history entry per click
        window.history.replaceState(null, "", "#" + state.dataset + "/" + state.family);
      }
    };
    Array.prototype.forEach.call(datasetTabs, function (tab) {
      tab.addEventListener("click", function () {
        state.dataset = tab.getAttribute("data-dataset");
        show(true);
      });
    });
    Array.prototype.forEach.call(familyTabs, function (tab) {
      tab.addEventListener("click", function () {
        state.family = tab.getAttribute("data-family");
        show(true);
      });
    });
    window.addEventListener("hashchange", function () {
      if (read()) {
        show(false);
      }
    });
    read();
    Array.prototype.forEach.call(document.querySelectorAll("tbody.more"), function (more) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "more";
      button.textContent = "+ " + more.getAttribute("data-count") + " more";
      button.addEventListener("click", function () {
        more.hidden = !more.hidden;
        button.textContent = (more.hidden ? "+ " : "− ") + more.getAttribute("data-count") +
          (more.hidden ? " more" : " fewer");
      });
      more.hidden = true;
      more.parentNode.parentNode.appendChild(button);
    });
    picker.hidden = false;
    show(false);
  }

  // The filter shows the lines whose notion scope (data-scope) is ticked and says how
  // many lines of each table are shown.
  var filter = document.getElementById("notion-filter");
  if (!filter) {
    return;
  }
  function applyFilter() {
    var shown = {};
    Array.prototype.forEach.call(filter.querySelectorAll("input"), function (box) {
      shown[box.value] = box.checked;
    });
    Array.prototype.forEach.call(document.querySelectorAll("table.leaderboard"), function (table) {
      var visible = 0;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (line) {
        line.hidden = !shown[line.getAttribute("data-scope")];
        visible += line.hidden ? 0 : 1;
      });
      var count = document.getElementById(table.id + "-count");
      if (count) count.textContent = visible + " of " + table.tBodies[0].rows.length + " rows shown";
    });
  }
  filter.hidden = false;
  filter.addEventListener("change", applyFilter);
  applyFilter();
}());
