// Sortable tables and the privacy-notion filter of the leaderboard site.
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
      count.textContent = visible + " of " + table.tBodies[0].rows.length + " rows shown";
    });
  }
  filter.hidden = false;
  filter.addEventListener("change", applyFilter);
  applyFilter();
}());
